//! Helpers shared by the runtime tests.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{
    ConnId, Handler, Runtime, RuntimeConfig, RuntimeError, RuntimeHandle, ShardCtx, ShardId,
};

/// Generous bound used only to turn a hang into a failure, never to measure speed.
pub const HANG: Duration = Duration::from_secs(30);

/// A config listening on an ephemeral loopback port with `shards` shards.
pub fn config(shards: usize) -> RuntimeConfig {
    RuntimeConfig {
        shards: Some(shards),
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        ..RuntimeConfig::default()
    }
}

/// Reports that the calling test skips, and why: one `SKIP: <reason>` line written straight to
/// the process's stderr (libtest captures `println!`/`eprintln!` of passing tests, and has no
/// runtime skip), so it shows in every run and `scripts/test.d` can count it. The caller then
/// returns without checking anything.
pub fn skip(reason: &dyn std::fmt::Display) {
    let mut stderr = std::io::stderr().lock();
    // A failed write to stderr leaves nothing to report it to.
    let _ = writeln!(stderr, "SKIP: {reason}");
}

/// Starts the runtime; `None` (after [`skip`]) when the forced backend is unavailable.
pub fn start<H, F>(config: RuntimeConfig, factory: F) -> Option<RuntimeHandle<H::Message>>
where
    H: Handler,
    F: Fn(ShardId) -> H + Send + Sync + 'static,
{
    match Runtime::start(config, factory) {
        Ok(handle) => Some(handle),
        Err(
            error @ (RuntimeError::KernelTooOld { .. } | RuntimeError::UringUnavailable { .. }),
        ) => {
            skip(&format_args!("backend unavailable on this kernel: {error}"));
            None
        }
        Err(error) => panic!("runtime start failed: {error}"),
    }
}

/// Polls `done` until it holds; fails after the hang bound (never a measured time).
pub fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + HANG;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A blocking client with the hang bound as read/write timeout.
pub fn client(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(HANG)).unwrap();
    stream.set_write_timeout(Some(HANG)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// Reads exactly `len` bytes.
pub fn read_exact(stream: &mut TcpStream, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    stream.read_exact(&mut buf).expect("read_exact");
    buf
}

/// Reads until EOF.
pub fn read_to_end(stream: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).expect("read_to_end");
    buf
}

/// Writes all of `data`.
pub fn write_all(stream: &mut TcpStream, data: &[u8]) {
    stream.write_all(data).expect("write_all");
}

/// Deterministic test payload: byte `i` of stream `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Echoes every byte back.
pub struct Echo;

impl Handler for Echo {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        ctx.send(conn, data).expect("echo on an open connection");
    }
}
