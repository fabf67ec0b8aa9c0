//! The load: ring-runtime client shards (`--client-shards`) sharing N outbound connections,
//! each connection keeping `window` messages in flight and sending a new one per message echoed
//! back. With `--rate R` the
//! sends are paced to R messages per second in all (a send waits for both its window slot and
//! a token), so the server can be measured below saturation too.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ring_runtime::{ConnId, Handler, Runtime, RuntimeConfig, ShardCtx, ShardId, TimerId};

use crate::cpu::process_cpu;
use crate::{Options, Outcome};

struct Load {
    target: SocketAddr,
    conns: usize,
    window: usize,
    message: Bytes,
    received: Vec<usize>,
    echoed: Arc<AtomicU64>,
    connected: Arc<AtomicU64>,
    pacer: Option<Pacer>,
}

/// Token bucket for `--rate`: refilled every tick, spent on window slots in arrival order.
struct Pacer {
    rate: f64,
    tokens: f64,
    last: Instant,
    /// One entry per free window slot.
    ready: VecDeque<ConnId>,
}

/// How often the pacer releases sends.
const PACE_TICK: Duration = Duration::from_millis(1);

impl Load {
    /// Sends one message on `conn` now, or (paced) when a token is there.
    fn slot_free(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId) {
        match &mut self.pacer {
            Some(pacer) => pacer.ready.push_back(conn),
            None => {
                let _ = ctx.send(conn, self.message.clone());
            }
        }
    }
}

impl Handler for Load {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_messages(&mut self, ctx: &mut ShardCtx<()>, _messages: Vec<()>) {
        for _ in 0..self.conns {
            ctx.connect(self.target, None).unwrap();
        }
        if self.pacer.is_some() {
            ctx.arm_timer(PACE_TICK, 0);
        }
    }

    fn on_timer(&mut self, ctx: &mut ShardCtx<()>, _timer: TimerId, _key: u64) {
        let Some(pacer) = &mut self.pacer else {
            return;
        };
        let now = ctx.now();
        pacer.tokens += pacer.rate * now.duration_since(pacer.last).as_secs_f64();
        pacer.last = now;
        while pacer.tokens >= 1.0 {
            let Some(conn) = pacer.ready.pop_front() else {
                // Nothing to send: no credit builds up while every window is full.
                pacer.tokens = pacer.tokens.min(1.0);
                break;
            };
            pacer.tokens -= 1.0;
            let _ = ctx.send(conn, self.message.clone());
        }
        ctx.arm_timer(PACE_TICK, 0);
    }

    fn on_connected(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, result: std::io::Result<()>) {
        result.unwrap();
        self.connected.fetch_add(1, Ordering::Relaxed);
        for _ in 0..self.window {
            self.slot_free(ctx, conn);
        }
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        let index = conn.index() as usize;
        if self.received.len() <= index {
            self.received.resize(index + 1, 0);
        }
        let total = self.received[index] + data.len();
        let complete = total / self.message.len();
        self.received[index] = total % self.message.len();
        self.echoed.fetch_add(complete as u64, Ordering::Relaxed);
        for _ in 0..complete {
            self.slot_free(ctx, conn);
        }
    }
}

/// Connects `conns` connections, waits until all are up, then measures for `seconds`.
pub fn run(target: SocketAddr, conns: usize, options: &Options, server_pid: u32) -> Outcome {
    let echoed = Arc::new(AtomicU64::new(0));
    let connected = Arc::new(AtomicU64::new(0));
    let shards = options.client_shards;
    let config = RuntimeConfig {
        shards: Some(shards),
        pin_threads: false,
        ..RuntimeConfig::default()
    };
    let (window, size, rate) = (options.window, options.size, options.rate);
    let (echoed_in, connected_in) = (Arc::clone(&echoed), Arc::clone(&connected));
    let handle = Runtime::start(config, move |shard: ShardId| Load {
        target,
        // Shard 0 takes the remainder.
        conns: conns / shards
            + if shard.index() == 0 {
                conns % shards
            } else {
                0
            },
        window,
        message: Bytes::from(vec![b'm'; size]),
        received: Vec::new(),
        echoed: Arc::clone(&echoed_in),
        connected: Arc::clone(&connected_in),
        pacer: rate.map(|rate| Pacer {
            rate: rate as f64 / shards as f64,
            tokens: 0.0,
            last: Instant::now(),
            ready: VecDeque::new(),
        }),
    })
    .unwrap();
    for shard in 0..shards {
        handle
            .post(ShardId::new(u16::try_from(shard).unwrap()), vec![()])
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while connected.load(Ordering::Relaxed) < conns as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let (start, cpu_start) = (Instant::now(), process_cpu(&server_pid.to_string()));
    let messages_start = echoed.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs_f64(options.seconds));
    let messages = echoed.load(Ordering::Relaxed) - messages_start;
    let (wall, server_cpu) = (
        start.elapsed(),
        process_cpu(&server_pid.to_string()) - cpu_start,
    );
    // Load that goes on after the measurement, e.g. for a profiler (runtime-echo-perf.sh).
    std::thread::sleep(Duration::from_secs_f64(options.linger));
    handle.shutdown();
    let _ = handle.join();
    Outcome {
        messages,
        wall,
        server_cpu,
    }
}
