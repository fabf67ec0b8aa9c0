//! The load: one ring-runtime shard with N outbound connections, each keeping `window`
//! messages in flight and sending a new one per message echoed back.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ring_runtime::{ConnId, Handler, Runtime, RuntimeConfig, ShardCtx, ShardId};

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
}

impl Handler for Load {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_messages(&mut self, ctx: &mut ShardCtx<()>, _messages: Vec<()>) {
        for _ in 0..self.conns {
            ctx.connect(self.target, None).unwrap();
        }
    }

    fn on_connected(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, result: std::io::Result<()>) {
        result.unwrap();
        self.connected.fetch_add(1, Ordering::Relaxed);
        for _ in 0..self.window {
            ctx.send(conn, self.message.clone()).unwrap();
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
            let _ = ctx.send(conn, self.message.clone());
        }
    }
}

/// Connects `conns` connections, waits until all are up, then measures for `seconds`.
pub fn run(target: SocketAddr, conns: usize, options: &Options, server_pid: u32) -> Outcome {
    let echoed = Arc::new(AtomicU64::new(0));
    let connected = Arc::new(AtomicU64::new(0));
    let config = RuntimeConfig {
        shards: Some(1),
        pin_threads: false,
        ..RuntimeConfig::default()
    };
    let (window, size) = (options.window, options.size);
    let (echoed_in, connected_in) = (Arc::clone(&echoed), Arc::clone(&connected));
    let handle = Runtime::start(config, move |_| Load {
        target,
        conns,
        window,
        message: Bytes::from(vec![b'm'; size]),
        received: Vec::new(),
        echoed: Arc::clone(&echoed_in),
        connected: Arc::clone(&connected_in),
    })
    .unwrap();
    handle.post(ShardId::new(0), vec![()]).unwrap();
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
    handle.shutdown();
    let _ = handle.join();
    Outcome {
        messages,
        wall,
        server_cpu,
    }
}
