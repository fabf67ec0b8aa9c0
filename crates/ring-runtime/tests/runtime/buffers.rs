//! The provided-buffer ring after a connection storm: the buffers the storm warmed go back to
//! the OS once the shard is idle, and receives into them afterwards still read their data
//! (as do connections after the shard shrank its per-turn lists, `release_idle_memory`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{BackendKind, ConnId, Handler, RuntimeHandle, ShardCtx};

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

/// Few receive buffers, one page each: a round's receives (several buffers per message) run
/// the ring dry at once, and a dropped page is a whole buffer.
const BUFFERS: u16 = 64;
const BUFFER_SIZE: u32 = 4096;
/// More connections than buffers.
const CONNS: usize = 300;

/// One shard with [`BUFFERS`] receive buffers of [`BUFFER_SIZE`] running `make`'s handler,
/// and [`CONNS`] clients connected to it; `None` (the test skips) without io_uring.
fn start_with_clients<H, F>(make: F) -> Option<(RuntimeHandle<()>, Vec<std::net::TcpStream>)>
where
    H: Handler<Message = ()>,
    F: Fn(ring_runtime::ShardId) -> H + Send + Sync + 'static,
{
    let mut config = common::config(1);
    config.recv_buffers = BUFFERS;
    config.recv_buffer_size = BUFFER_SIZE;
    let handle = common::start(config, make)?;
    if handle.backend() != BackendKind::Uring {
        common::skip(&"no provided-buffer ring on this backend");
        handle.shutdown();
        handle.join().unwrap();
        return None;
    }
    let addr = handle.local_addrs()[0];
    let streams = (0..CONNS).map(|_| common::client(addr)).collect();
    Some((handle, streams))
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
    let hold = Arc::new(AtomicBool::new(false));
    let released = Arc::new(AtomicU64::new(0));
    let (shared_hold, published) = (Arc::clone(&hold), Arc::clone(&released));
    let Some((handle, mut streams)) = start_with_clients(move |_| StormEcho {
        hold: Arc::clone(&shared_hold),
        released: Arc::clone(&published),
    }) else {
        return;
    };
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

/// How often [`QuietEcho`] wakes its shard (so that idle turns still publish their counts).
const TICK: Duration = Duration::from_millis(10);

/// [`StormEcho`]'s storms, and when the test asks, tells the shard at the end of that turn that
/// it has gone quiet; from then on publishes each turn's count of warm receive buffers. A timer
/// wakes the shard every [`TICK`], so idle turns come without any receive.
struct QuietEcho {
    storm: StormEcho,
    quiet_now: Arc<AtomicBool>,
    went_quiet: bool,
    ticking: bool,
    warm_since_quiet: Arc<AtomicU64>,
}

impl Handler for QuietEcho {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {
        if !std::mem::replace(&mut self.ticking, true) {
            ctx.arm_timer(TICK, 0);
        }
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        self.storm.on_data(ctx, conn, data);
    }

    fn on_timer(&mut self, ctx: &mut ShardCtx<()>, _timer: ring_runtime::TimerId, _key: u64) {
        ctx.arm_timer(TICK, 0);
    }

    fn on_turn_end(&mut self, ctx: &mut ShardCtx<()>) {
        if self.went_quiet {
            let warm = ctx.stats().recv_buffers_warm;
            self.warm_since_quiet.store(warm, Ordering::Release);
        }
        if self.quiet_now.swap(false, Ordering::AcqRel) {
            ctx.release_idle_memory();
            self.went_quiet = true;
        }
    }
}

/// Whether this kernel builds a `DEFER_TASKRUN` ring (the runtime's ring is one then): without
/// it only the spare buffers' pages can go back, not those in the ring.
fn defers_task_work() -> bool {
    io_uring::IoUring::<io_uring::squeue::Entry, io_uring::cqueue::Entry>::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(8)
        .is_ok()
}

/// A shard told it has gone quiet hands back the pages of every receive buffer, the ones in
/// the ring too (an idle shard held up to twice the ring's target before), and the receives
/// after it still read their data.
#[test]
fn a_quiet_shard_holds_no_receive_buffer_pages_and_still_receives() {
    if !defers_task_work() {
        common::skip(&"no DEFER_TASKRUN ring: the buffers in the ring keep their pages");
        return;
    }
    let hold = Arc::new(AtomicBool::new(false));
    let quiet_now = Arc::new(AtomicBool::new(false));
    let warm = Arc::new(AtomicU64::new(u64::MAX));
    let (shared_hold, shared_quiet, published) =
        (Arc::clone(&hold), Arc::clone(&quiet_now), Arc::clone(&warm));
    let Some((handle, mut streams)) = start_with_clients(move |_| QuietEcho {
        storm: StormEcho {
            hold: Arc::clone(&shared_hold),
            released: Arc::new(AtomicU64::new(0)),
        },
        quiet_now: Arc::clone(&shared_quiet),
        went_quiet: false,
        ticking: false,
        warm_since_quiet: Arc::clone(&published),
    }) else {
        return;
    };
    for round in 0..3 {
        hold.store(true, Ordering::Release);
        echo_round(&mut streams, round * 1_000, 12_000);
    }
    quiet_now.store(true, Ordering::Release);
    common::wait_until("a quiet turn with no warm receive buffer", || {
        warm.load(Ordering::Acquire) == 0
    });
    echo_round(&mut streams, 10_000, 12_000);
    handle.shutdown();
    let stats = handle.join().unwrap();
    assert!(
        stats[0].recv_buffers_warm > 0,
        "the round after the quiet turn wrote buffers again"
    );
}
