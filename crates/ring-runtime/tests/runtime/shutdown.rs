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

fn start_server(drain_timeout: Duration) -> Option<Started> {
    let (queued_tx, queued) = mpsc::channel();
    let (reason_tx, reasons) = mpsc::channel();
    let mut config = common::config(2);
    config.drain_timeout = drain_timeout;
    let handle = common::start(config, move |_| Server {
        queued: queued_tx.clone(),
        reasons: reason_tx.clone(),
        conns: Vec::new(),
    })?;
    Some(Started {
        handle,
        queued,
        reasons,
    })
}

struct Started {
    handle: ring_runtime::RuntimeHandle<()>,
    queued: mpsc::Receiver<()>,
    reasons: mpsc::Receiver<CloseReason>,
}

#[test]
fn shutdown_drains_in_flight_writes_then_closes() {
    const READERS: usize = 8;
    let Some(started) = start_server(common::HANG) else {
        return;
    };
    let addr = started.handle.local_addrs()[0];
    let mut readers: Vec<_> = (0..READERS).map(|_| common::client(addr)).collect();
    for stream in &mut readers {
        common::write_all(stream, b"go");
    }
    // Every request is read and answered before shutdown: unread input at close would make
    // the kernel reset the connection, which is not what this test is about.
    for _ in 0..READERS {
        started.queued.recv_timeout(common::HANG).unwrap();
    }
    started.handle.shutdown();
    let handle = started.handle;
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
    let reasons: Vec<CloseReason> = started.reasons.try_iter().collect();
    assert_eq!(reasons, vec![CloseReason::Shutdown; READERS]);
}

#[test]
fn shutdown_cuts_off_a_peer_that_never_reads_after_the_drain_timeout() {
    let Some(started) = start_server(Duration::from_millis(200)) else {
        return;
    };
    let mut stuck = common::client(started.handle.local_addrs()[0]);
    common::write_all(&mut stuck, b"stuck");
    started.queued.recv_timeout(common::HANG).unwrap();
    started.handle.shutdown();
    started.handle.join().unwrap();
    let reasons: Vec<CloseReason> = started.reasons.try_iter().collect();
    assert_eq!(reasons, vec![CloseReason::DrainTimeout]);
    let mut buf = Vec::new();
    let outcome = std::io::Read::read_to_end(&mut stuck, &mut buf);
    assert!(
        outcome.is_err(),
        "the aborted connection is reset, not closed cleanly"
    );
}

/// Batches to count: a slow shard 0 posts them to shard 1 from its shutdown hook.
const LATE_BATCHES: usize = 50;

/// Shard 0 posts [`LATE_BATCHES`] messages to shard 1 when shutdown begins, after a pause
/// (a shard slower than its peer); shard 1 counts what it handles.
struct LatePoster {
    handled: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Handler for LatePoster {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _data: Bytes) {}

    fn on_messages(&mut self, _ctx: &mut ShardCtx<()>, messages: Vec<()>) {
        let handled = &self.handled;
        handled.fetch_add(messages.len(), std::sync::atomic::Ordering::Relaxed);
    }

    fn on_shutdown(&mut self, ctx: &mut ShardCtx<()>) {
        if ctx.shard_id().index() != 0 {
            return;
        }
        // Shard 1 has long finished its own shutdown by now.
        std::thread::sleep(Duration::from_millis(200));
        for _ in 0..LATE_BATCHES {
            ctx.post(ring_runtime::ShardId::new(1), ()).unwrap();
        }
    }
}

/// What a shard posts while the runtime shuts down is handled by its destination, even one
/// that had nothing left to do: shards end together, once every one is quiet.
#[test]
fn what_a_slow_shard_posts_at_shutdown_is_handled() {
    let handled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&handled);
    let Some(handle) = common::start(common::config(2), move |_| LatePoster {
        handled: std::sync::Arc::clone(&counted),
    }) else {
        return;
    };
    handle.shutdown();
    handle.join().unwrap();
    assert_eq!(
        handled.load(std::sync::atomic::Ordering::Relaxed),
        LATE_BATCHES
    );
}
