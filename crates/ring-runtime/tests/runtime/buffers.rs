//! The provided-buffer ring after a connection storm: the buffers the storm warmed go back to
//! the OS once the shard is idle, and receives into them afterwards still read their data
//! (as do connections after the shard shrank its per-turn lists, `release_idle_memory`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{BackendKind, ConnId, Handler, ShardCtx};

use crate::common;

/// Echoes, but when asked, holds the shard on the next data it sees, so that every client's
/// message of a round waits in its socket and the next wait finds them all at once (a storm
/// that runs the ring dry and grows its offer). Publishes the shard's released-buffer count
/// each turn.
struct StormEcho {
    hold: Arc<AtomicBool>,
    released: Arc<AtomicU64>,
}

impl Handler for StormEcho {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        if self.hold.swap(false, Ordering::AcqRel) {
            std::thread::sleep(Duration::from_millis(300));
        }
        ctx.send(conn, data).expect("echo on an open connection");
    }

    fn on_turn_end(&mut self, ctx: &mut ShardCtx<()>) {
        let released = ctx.stats().recv_buffers_released;
        if self.released.swap(released, Ordering::AcqRel) == 0 && released > 0 {
            // Quiet: the lists the storm grew shrink too; the rounds after must not notice.
            ctx.release_idle_memory();
        }
    }
}

/// Sends `seed`'s pattern of `len` bytes on every stream, then checks every echo.
fn echo_round(streams: &mut [std::net::TcpStream], seed: u64, len: usize) {
    for (index, stream) in streams.iter_mut().enumerate() {
        common::write_all(stream, &common::pattern(seed + index as u64, len));
    }
    for (index, stream) in streams.iter_mut().enumerate() {
        let echo = common::read_exact(stream, len);
        assert!(
            echo == common::pattern(seed + index as u64, len),
            "connection {index} read back other bytes than it sent"
        );
    }
}

#[test]
fn buffers_a_storm_warmed_go_back_when_idle_and_still_receive() {
    const CONNS: usize = 300;
    // Few, one page each: a round's receives (several buffers per message) run the ring
    // dry at once, and a dropped page is a whole buffer.
    const BUFFERS: u16 = 64;
    const BUFFER_SIZE: u32 = 4096;
    let hold = Arc::new(AtomicBool::new(false));
    let released = Arc::new(AtomicU64::new(0));
    let (shared_hold, published) = (Arc::clone(&hold), Arc::clone(&released));
    let mut config = common::config(1);
    config.recv_buffers = BUFFERS;
    config.recv_buffer_size = BUFFER_SIZE;
    let Some(handle) = common::start(config, move |_| StormEcho {
        hold: Arc::clone(&shared_hold),
        released: Arc::clone(&published),
    }) else {
        return;
    };
    if handle.backend() != BackendKind::Uring {
        common::skip(&"no provided-buffer ring on this backend");
        handle.shutdown();
        handle.join().unwrap();
        return;
    }
    let addr = handle.local_addrs()[0];
    let mut streams: Vec<_> = (0..CONNS).map(|_| common::client(addr)).collect();
    // More connections than buffers, all at once, a few times: the offer grows to every
    // buffer, so none is spare and whatever goes back to the OS was in the ring.
    for round in 0..4 {
        hold.store(true, Ordering::Release);
        echo_round(&mut streams, round * 1_000, 12_000);
    }
    common::wait_until("the idle ring to hand pages back", || {
        released.load(Ordering::Acquire) > 0
    });
    // Two more rounds: the first reads into buffers whose pages were dropped while they sat in
    // the ring, the second into the buffers handed back after it.
    echo_round(&mut streams, 10_000, 3_000);
    echo_round(&mut streams, 20_000, 20_000);
    handle.shutdown();
    let stats = handle.join().unwrap();
    println!(
        "buffers released {}, ENOBUFS re-arms {}",
        stats[0].recv_buffers_released, stats[0].recv_rearms_enobufs
    );
}
