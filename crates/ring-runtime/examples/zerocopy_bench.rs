//! Zero-copy threshold: streams frames of one size from an io_uring shard to a reader thread,
//! once with plain `SENDMSG`/`SEND` and once with `SENDMSG_ZC` (threshold 0), and reports
//! throughput and CPU per GiB (whole process: shard + reader, identical in both runs).
//! Where zero-copy starts to win on this kernel is where `zerocopy_threshold` belongs.
//!
//!   cargo run --release -p ring-runtime --example zerocopy_bench -- 1024,16384,65536,1048576

#![allow(clippy::unwrap_used, reason = "benchmark program: fail loudly")]

#[path = "echo_bench/cpu.rs"]
mod cpu;
#[path = "echo_bench/sink.rs"]
mod sink;

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ring_runtime::{BackendChoice, ConnId, Handler, Runtime, RuntimeConfig, ShardCtx};

/// Bytes streamed per measurement.
const TOTAL: usize = 1 << 30;
/// Bytes the sender keeps queued (its backpressure bound).
const QUEUED: usize = 4 << 20;

struct Streamer {
    frame: Bytes,
    conn: Option<ConnId>,
    sent: usize,
}

impl Streamer {
    fn top_up(&mut self, ctx: &mut ShardCtx<()>) {
        let Some(conn) = self.conn else { return };
        while self.sent < TOTAL && ctx.queued_bytes(conn) < QUEUED {
            ctx.send(conn, self.frame.clone()).unwrap();
            self.sent += self.frame.len();
        }
        if self.sent >= TOTAL && ctx.queued_bytes(conn) == 0 {
            ctx.close(conn);
            self.conn = None;
        }
    }
}

impl Handler for Streamer {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, _peer: SocketAddr) {
        self.conn = Some(conn);
        self.top_up(ctx);
    }

    fn on_data(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _data: Bytes) {}

    fn on_turn_end(&mut self, ctx: &mut ShardCtx<()>) {
        self.top_up(ctx);
        // Keep turning while frames wait for room: a zero timer wakes the next turn.
        if self.conn.is_some() {
            ctx.arm_timer(Duration::ZERO, 0);
        }
    }
}

fn measure(size: usize, zerocopy: bool) -> (f64, f64, u64) {
    let config = RuntimeConfig {
        shards: Some(1),
        pin_threads: false,
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        backend: BackendChoice::Uring,
        zerocopy_threshold: zerocopy.then_some(0),
        max_iovecs: 64,
        ..RuntimeConfig::default()
    };
    let frame = Bytes::from(vec![7u8; size]);
    let handle = Runtime::start(config, move |_| Streamer {
        frame: frame.clone(),
        conn: None,
        sent: 0,
    })
    .unwrap();
    let addr = handle.local_addrs()[0];
    let (cpu_start, start) = (cpu::process_cpu("self"), Instant::now());
    let done = sink::drain(TcpStream::connect(addr).unwrap());
    let received = done.recv().unwrap();
    let (wall, cpu) = (start.elapsed(), cpu::process_cpu("self") - cpu_start);
    assert_eq!(received, TOTAL, "every byte arrives");
    handle.shutdown();
    let stats = handle.join().unwrap();
    let gib = TOTAL as f64 / f64::from(1u32 << 30);
    (
        gib / wall.as_secs_f64(),
        cpu.as_secs_f64() / gib,
        stats[0].zerocopy_writes,
    )
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "1024,4096,16384,65536,262144,1048576".into())
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    println!("| frame | copy GiB/s | copy CPU-s/GiB | zc GiB/s | zc CPU-s/GiB | zc sends |");
    println!("|---|---|---|---|---|---|");
    for size in sizes {
        let (copy_rate, copy_cpu, _) = measure(size, false);
        let (zc_rate, zc_cpu, zc_sends) = measure(size, true);
        println!(
            "| {size} | {copy_rate:.2} | {copy_cpu:.2} | {zc_rate:.2} | {zc_cpu:.2} | {zc_sends} |"
        );
    }
}
