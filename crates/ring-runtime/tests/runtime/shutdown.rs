//! Graceful shutdown with connections in flight: queued bytes are delivered, a reader that
//! never reads is cut off after the drain timeout, and join returns.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{CloseReason, ConnId, Handler, ShardCtx};

use crate::common;

const REPLY: usize = 2 * 1024 * 1024;
/// More than the kernel buffers of a peer that never reads.
const STUCK_REPLY: usize = 24 * 1024 * 1024;

/// On "go" queues a 2 MiB reply (24 MiB on "stuck"); on shutdown sends "bye"; reports when a
/// reply is queued and every close reason.
struct Server {
    queued: mpsc::Sender<()>,
    reasons: mpsc::Sender<CloseReason>,
    conns: Vec<ConnId>,
}

impl Handler for Server {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, conn: ConnId, _peer: SocketAddr) {
        self.conns.push(conn);
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        let len = if &data[..] == b"stuck" {
            STUCK_REPLY
        } else {
            REPLY
        };
        ctx.send(conn, Bytes::from(common::pattern(1, len)))
            .unwrap();
        self.queued.send(()).unwrap();
    }

    fn on_shutdown(&mut self, ctx: &mut ShardCtx<()>) {
        for &conn in &self.conns {
            if ctx.is_open(conn) {
                ctx.send(conn, Bytes::from_static(b"bye")).unwrap();
            }
        }
    }

    fn on_closed(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, reason: CloseReason) {
        self.reasons.send(reason).unwrap();
    }
}

#[test]
fn shutdown_drains_in_flight_writes_then_closes() {
    const READERS: usize = 8;
    let (queued_tx, queued_rx) = mpsc::channel();
    let (reason_tx, reason_rx) = mpsc::channel();
    let mut config = common::config(2);
    config.drain_timeout = Duration::from_millis(300);
    let Some(handle) = common::start(config, move |_| Server {
        queued: queued_tx.clone(),
        reasons: reason_tx.clone(),
        conns: Vec::new(),
    }) else {
        return;
    };
    let addr = handle.local_addrs()[0];
    let mut readers: Vec<_> = (0..READERS).map(|_| common::client(addr)).collect();
    for stream in &mut readers {
        common::write_all(stream, b"go");
    }
    // Never reads: its reply cannot drain, so the drain timeout must cut it off.
    let mut stuck = common::client(addr);
    common::write_all(&mut stuck, b"stuck");
    // Every request is read and answered before shutdown: unread input at close would make
    // the kernel reset the connection, which is not what this test is about.
    for _ in 0..=READERS {
        queued_rx.recv_timeout(common::HANG).unwrap();
    }
    handle.shutdown();
    let joiner = std::thread::spawn(move || handle.join());
    let mut expected = common::pattern(1, REPLY);
    expected.extend_from_slice(b"bye");
    for mut stream in readers {
        assert!(
            common::read_to_end(&mut stream) == expected,
            "everything queued arrives"
        );
    }
    joiner.join().unwrap().unwrap();
    let mut reasons: Vec<CloseReason> = reason_rx.try_iter().collect();
    reasons.sort_by_key(|r| format!("{r:?}"));
    println!("close reasons: {reasons:?}");
    let drained = reasons
        .iter()
        .filter(|r| **r == CloseReason::Shutdown)
        .count();
    assert_eq!(drained, READERS);
    assert_eq!(reasons.len(), READERS + 1);
    assert!(
        reasons.contains(&CloseReason::DrainTimeout),
        "the stuck reader is cut off"
    );
    drop(stuck);
}
