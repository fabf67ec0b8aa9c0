//! A handler that panics while its shard has receives and sends in flight: the shard's thread
//! ends with the panic reported, its in-flight operations are cancelled and reaped (its
//! clients see their connections closed), and the other shard keeps serving.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;

use bytes::Bytes;
use ring_runtime::{ConnId, ExitCause, Handler, RuntimeError, ShardCtx, ShardExit, ShardId};

use crate::common;

/// More than the kernel buffers of a peer that never reads: the write stays in flight.
const STUCK_REPLY: usize = 24 * 1024 * 1024;
const PANIC_MESSAGE: &str = "injected handler panic";

/// "who" -> the shard index (one byte); "big" -> a reply the peer does not read; "panic".
struct Server {
    shard: ShardId,
}

impl Handler for Server {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        match &data[..] {
            b"who" => {
                let index = u8::try_from(self.shard.index()).unwrap();
                ctx.send(conn, Bytes::from(vec![index])).unwrap();
            }
            b"big" => ctx
                .send(conn, Bytes::from(common::pattern(2, STUCK_REPLY)))
                .unwrap(),
            b"panic" => panic!("{PANIC_MESSAGE}"),
            other => panic!("unexpected request {other:?}"),
        }
    }
}

/// Two connections per shard: `[shard] = (idle, stuck)`.
fn connections_on_both_shards(addr: SocketAddr) -> [Vec<TcpStream>; 2] {
    let mut found: [Vec<TcpStream>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..256 {
        if found.iter().all(|streams| streams.len() >= 2) {
            break;
        }
        let mut stream = common::client(addr);
        common::write_all(&mut stream, b"who");
        let shard = usize::from(common::read_exact(&mut stream, 1)[0]);
        if found[shard].len() < 2 {
            found[shard].push(stream);
        }
    }
    assert!(
        found.iter().all(|streams| streams.len() == 2),
        "SO_REUSEPORT spread 256 connections over both shards"
    );
    found
}

/// Starts the stuck reply on `stream` and waits until its write is in flight.
fn start_stuck_reply(stream: &mut TcpStream) {
    common::write_all(stream, b"big");
    assert_eq!(common::read_exact(stream, 1), common::pattern(2, 1));
}

/// Reads until the connection ends; fails on the hang bound instead of an EOF or reset.
fn assert_closed(stream: &mut TcpStream) {
    let mut sink = Vec::new();
    if let Err(error) = stream.read_to_end(&mut sink) {
        assert!(
            !matches!(
                error.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "connection of the dead shard still open: {error}"
        );
    }
}

#[test]
fn handler_panic_ends_its_shard_alone_with_io_in_flight() {
    let Some(handle) = common::start(common::config(2), |shard| Server { shard }) else {
        return;
    };
    let [mut dead, mut alive] = connections_on_both_shards(handle.local_addrs()[0]);
    start_stuck_reply(&mut dead[1]);
    start_stuck_reply(&mut alive[1]);
    let exits = handle.exits();
    let (exit_tx, exit_rx) = mpsc::channel();
    std::thread::spawn(move || exit_tx.send(exits.wait_first()));
    common::write_all(&mut dead[0], b"panic");
    let exit = exit_rx.recv_timeout(common::HANG).unwrap();
    assert_eq!(
        exit,
        ShardExit {
            shard: ShardId::new(0),
            cause: ExitCause::Panicked {
                message: PANIC_MESSAGE.to_owned()
            },
        }
    );
    for stream in &mut dead {
        assert_closed(stream);
    }
    // The other shard still serves its connections, the stuck write included.
    common::write_all(&mut alive[0], b"who");
    assert_eq!(common::read_exact(&mut alive[0], 1), vec![1]);
    let rest = common::read_exact(&mut alive[1], STUCK_REPLY - 1);
    assert!(rest[..] == common::pattern(2, STUCK_REPLY)[1..]);
    assert_eq!(
        handle.exits().so_far().len(),
        1,
        "only the panicking shard ended"
    );
    handle.shutdown();
    match handle.join() {
        Err(RuntimeError::ShardPanicked { shard }) => assert_eq!(shard, ShardId::new(0)),
        other => panic!("join reports the panic, got {other:?}"),
    }
}
