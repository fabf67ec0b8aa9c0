//! The `ringmq` binary as operators run it: a process with a config file, its stderr collected,
//! signalled with `kill -HUP`. Tests: connection lifecycle lines (bounded), no colour codes on a
//! pipe, JSON lines, the SIGHUP reload report in the log, and NATS credentials kept out of it.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::client::{RawClient, V5};
use crate::harness::wait_until;
use crate::ports::free_port;

/// A `ringmq` process, killed at drop.
pub struct BrokerProcess {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl BrokerProcess {
    /// Starts the binary with `--config config` (RUST_LOG unset, so `[log]` decides) and waits
    /// until it listens.
    pub fn start(config: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
            .arg("--config")
            .arg(config)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the broker binary");
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap_or_else(|e| e.into_inner());
                log.push_str(&line);
                log.push('\n');
            }
        });
        let process = Self { child, log };
        process.wait_for_log("ringmq listening");
        process
    }

    /// Everything the process wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until stderr holds `needle`; the log then.
    pub fn wait_for_log(&self, needle: &str) -> String {
        wait_until(&format!("{needle:?} in the broker's log"), || {
            let log = self.log();
            log.contains(needle).then_some(log)
        })
    }

    /// Sends SIGHUP.
    pub fn sighup(&self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -HUP {pid}");
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A config on `port` with nothing stored, plus `extra`.
fn config_text(port: u16, extra: &str) -> String {
    format!(
        "[listeners]\ntcp = [\"127.0.0.1:{port}\"]\n[runtime]\nshards = 2\n\
         [persistence]\nengine = \"none\"\n{extra}"
    )
}

#[test]
fn the_binary_logs_bounded_lifecycle_lines_and_reports_a_sighup_reload() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ringmq.toml");
    let port = free_port();
    let lifecycle = "[log]\nmax_lifecycle_per_sec = 3\n";
    std::fs::write(&config, config_text(port, lifecycle)).unwrap();
    let broker = BrokerProcess::start(&config);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    drop(RawClient::connected_clean(addr, V5, "lifecycle-1"));
    let log = broker.wait_for_log("client disconnected");
    assert!(
        log.contains("client connected") && log.contains("lifecycle-1"),
        "{log}"
    );
    assert!(log.contains("protocol=\"5.0\""), "{log}");
    assert!(!log.contains('\u{1b}'), "no colour codes on a pipe: {log}");

    // A storm beyond the bound: a few lines, then one summary of the rest.
    let clients: Vec<_> = (0..8)
        .map(|i| RawClient::connected_clean(addr, V5, &format!("storm-{i}")))
        .collect();
    let log = broker.wait_for_log("lifecycle lines suppressed");
    assert!(log.matches("storm-").count() < 8, "{log}");
    drop(clients);

    // A file that no longer validates is refused whole.
    let broken = format!("{lifecycle}[limits]\nreceive_maximum = 0\n");
    std::fs::write(&config, config_text(port, &broken)).unwrap();
    broker.sighup();
    let log = broker.wait_for_log("the new configuration is refused");
    assert!(log.contains("limits.receive_maximum"), "{log}");

    // A new listener address is reported, not applied; the log level is applied.
    let other = free_port();
    let level = "[log]\nlevel = \"debug\"\nmax_lifecycle_per_sec = 3\n";
    std::fs::write(&config, config_text(other, level)).unwrap();
    broker.sighup();
    let log = broker.wait_for_log("listeners.tcp changed: takes effect at the next start");
    assert!(log.contains("log.level"), "{log}");
    drop(RawClient::connected_clean(addr, V5, "after-reload"));
}

#[test]
fn the_binary_writes_json_lines_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ringmq.toml");
    let port = free_port();
    std::fs::write(&config, config_text(port, "[log]\nformat = \"json\"\n")).unwrap();
    let broker = BrokerProcess::start(&config);
    let log = broker.log();
    let lines: Vec<_> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for line in lines {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        assert!(value.get("level").is_some(), "{line}");
    }
}

/// The scheduler slice the kernel reports for each of process `pid`'s shard threads.
fn shard_slices(pid: u32) -> Vec<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the broker's threads");
    let mut slices = Vec::new();
    for task in tasks.map_while(Result::ok) {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        // Shard threads only (`ringmq-shard-N`, not the watcher `ringmq-shard-watch`).
        let is_shard = comm
            .trim()
            .strip_prefix("ringmq-shard-")
            .is_some_and(|index| index.bytes().all(|b| b.is_ascii_digit()));
        if !is_shard {
            continue;
        }
        let sched = std::fs::read_to_string(task.path().join("sched")).unwrap_or_default();
        let slice = sched
            .lines()
            .find(|line| line.starts_with("se.slice"))
            .and_then(|line| line.split(':').nth(1))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no se.slice for {comm}: {sched}"));
        slices.push(slice);
    }
    slices
}

#[test]
fn the_shard_threads_run_with_the_configured_scheduler_slice() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ringmq.toml");
    let port = free_port();
    let text = config_text(port, "").replace("shards = 2\n", "shards = 2\nsched_slice_us = 250\n");
    std::fs::write(&config, text).unwrap();
    let broker = BrokerProcess::start(&config);
    let log = broker.wait_for_log("scheduler slice");
    if log.contains("the kernel keeps its own scheduler slice") {
        return; // Before Linux 6.12: nothing to see in /proc.
    }
    assert!(
        log.contains("shard threads run with the scheduler slice asked for")
            && log.contains("250µs"),
        "{log}"
    );
    assert_eq!(shard_slices(broker.child.id()), vec![250_000, 250_000]);
}

/// The NATS servers are logged (at info) without the token or password in their URLs, also at
/// log level debug, where the NATS client's own lines would name them with their credentials
/// (nothing listens on the port: the node keeps retrying and serves its own clients meanwhile).
#[test]
fn the_binary_logs_the_nats_servers_without_their_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ringmq.toml");
    let port = free_port();
    let nats = free_port();
    let cluster = format!(
        "[log]\nlevel = \"debug\"\n[cluster]\nnode_id = \"n1\"\nnats = [\
         \"nats://NATS-T0KEN@127.0.0.1:{nats}\", \"nats://node:pa@ss-s3cret@127.0.0.1:{nats}\"]\n"
    );
    std::fs::write(&config, config_text(port, &cluster)).unwrap();
    let broker = BrokerProcess::start(&config);
    let log = broker.wait_for_log("cluster: connecting to NATS");
    assert!(
        log.contains(&format!("nats://<redacted>@127.0.0.1:{nats}"))
            && log.contains(&format!("nats://node:<redacted>@127.0.0.1:{nats}")),
        "{log}"
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    let log = broker.log();
    for secret in ["NATS-T0KEN", "s3cret", "pa@"] {
        assert!(!log.contains(secret), "{secret} logged: {log}");
    }
}
