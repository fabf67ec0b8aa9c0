//! Echo benchmark: messages per server CPU-second for the io_uring backend, the epoll backend
//! and a tokio baseline, at several connection counts, in one run.
//!
//! Each server runs in a child process (this binary with `serve <kind>`) on one thread (one
//! shard / a current-thread tokio runtime), so its CPU time is exactly the sum of its threads'
//! `/proc/<pid>/task/*/schedstat` run time. The load comes from ring-runtime client shards in
//! this process (`--client-shards`, default 1): every connection keeps `--window` messages of
//! `--size` bytes in flight (paced to `--rate` messages per second in all when given).
//!
//!   cargo run --release -p ring-runtime --example echo_bench -- \
//!       --conns 1,100,5000 --seconds 3 --servers uring,epoll,tokio --repeat 3

#![allow(clippy::unwrap_used, reason = "benchmark program: fail loudly")]

mod client;
mod cpu;
mod server;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Command-line options (`--key value`).
struct Options {
    conns: Vec<usize>,
    servers: Vec<String>,
    seconds: f64,
    size: usize,
    window: usize,
    /// Measurements per server and connection count, interleaved (server A, B, C, A, B, C, ...)
    /// so that a burst of load from elsewhere on the machine hits every server alike; the table
    /// reports the median.
    repeat: usize,
    /// Messages per second in all (paced load); `None`: as fast as the echoes come back.
    rate: Option<u64>,
    /// Client shards (threads) sharing the connections. Default 1.
    client_shards: usize,
    /// Seconds the load goes on after each measurement (for a profiler). Default 0.
    linger: f64,
}

fn parse_options(args: &[String]) -> Options {
    let mut options = Options {
        conns: vec![1, 100, 5000],
        servers: vec!["uring".into(), "epoll".into(), "tokio".into()],
        seconds: 3.0,
        size: 64,
        window: 1,
        repeat: 3,
        rate: None,
        client_shards: 1,
        linger: 0.0,
    };
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--conns" => options.conns = value.split(',').map(|v| v.parse().unwrap()).collect(),
            "--servers" => options.servers = value.split(',').map(str::to_owned).collect(),
            "--seconds" => options.seconds = value.parse().unwrap(),
            "--size" => options.size = value.parse().unwrap(),
            "--window" => options.window = value.parse().unwrap(),
            "--client-shards" => options.client_shards = value.parse::<usize>().unwrap().max(1),
            "--linger" => options.linger = value.parse().unwrap(),
            "--rate" => options.rate = Some(value.parse().unwrap()),
            "--repeat" => options.repeat = value.parse::<usize>().unwrap().max(1),
            other => panic!("unknown option {other}"),
        }
    }
    options
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve") {
        server::serve(&args[1]);
        return;
    }
    let options = parse_options(&args);
    ring_runtime::raise_fd_limit(20_000).unwrap();
    println!(
        "| server | conns | msgs/s | server CPU s | msgs per server CPU-s (median) | runs (min-max) | vs tokio |\n|---|---|---|---|---|---|---|"
    );
    for &conns in &options.conns {
        let mut runs: Vec<Vec<Outcome>> = options.servers.iter().map(|_| Vec::new()).collect();
        for _ in 0..options.repeat {
            for (kind, outcomes) in options.servers.iter().zip(&mut runs) {
                let (mut child, addr) = spawn_server(kind);
                outcomes.push(client::run(addr, conns, &options, child.id()));
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let medians: Vec<Outcome> = runs.iter_mut().map(|r| median(r)).collect();
        let tokio = options
            .servers
            .iter()
            .position(|kind| kind == "tokio")
            .map(|index| medians[index].per_cpu_second());
        for ((kind, result), outcomes) in options.servers.iter().zip(&medians).zip(&runs) {
            let ratio = tokio.map_or("-".into(), |t| {
                format!("{:.2}x", result.per_cpu_second() / t)
            });
            let (low, high) = (
                outcomes.first().map_or(0.0, Outcome::per_cpu_second),
                outcomes.last().map_or(0.0, Outcome::per_cpu_second),
            );
            println!(
                "| {kind} | {conns} | {:.0} | {:.2} | {:.0} | {low:.0}-{high:.0} | {ratio} |",
                result.messages as f64 / result.wall.as_secs_f64(),
                result.server_cpu.as_secs_f64(),
                result.per_cpu_second(),
            );
        }
    }
}

/// Sorts `outcomes` by messages per server CPU-second and returns the median one.
fn median(outcomes: &mut [Outcome]) -> Outcome {
    outcomes.sort_by(|a, b| a.per_cpu_second().total_cmp(&b.per_cpu_second()));
    outcomes[outcomes.len() / 2]
}

/// Starts `serve <kind>` and reads the address it listens on.
fn spawn_server(kind: &str) -> (Child, SocketAddr) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["serve", kind])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("bad server line {line:?}"));
    (child, addr)
}

/// What one measurement window produced.
#[derive(Clone, Copy)]
pub struct Outcome {
    pub messages: u64,
    pub wall: Duration,
    pub server_cpu: Duration,
}

impl Outcome {
    fn per_cpu_second(&self) -> f64 {
        self.messages as f64 / self.server_cpu.as_secs_f64().max(1e-9)
    }
}
