//! Write pacing (`RuntimeConfig::write_interval`, `RuntimeConfig::write_pacing`): a stream of
//! frames to one connection leaves in a few writes; expedited frames, sparse traffic and a
//! shutdown are never held, and under adaptive pacing an idle shard holds nothing. Every test
//! runs on a manual clock: a held write can only leave when the test advances the clock past
//! its interval (or shuts down), so what is held and what is released is checked without
//! measuring time.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{
    Clock, ConnId, Handler, ManualClock, RuntimeConfig, RuntimeHandle, ShardCtx, TimerId,
    WritePacing,
};

use crate::common;

/// Frames the ticker sends, one per timer firing.
const TICKS: u64 = 40;

/// How long "nothing arrives" is watched for, once the handler has seen the request: a held
/// write never leaves on a clock that stands still, so this only bounds a false pass.
const QUIET: Duration = Duration::from_millis(300);

/// Sends one byte per timer tick of `period`, `TICKS` times, then closes; counts the firings.
/// With `work`, each firing first spins that many rounds of arithmetic (CPU time the shard's
/// load gauge sees, however long the manual clock says the tick was).
struct Ticker {
    conn: Option<ConnId>,
    fired: Arc<AtomicU64>,
    period: Duration,
    work: u64,
}

impl Handler for Ticker {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, _peer: SocketAddr) {
        self.conn = Some(conn);
        ctx.arm_timer(Duration::ZERO, 0);
    }

    fn on_data(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _data: Bytes) {}

    fn on_timer(&mut self, ctx: &mut ShardCtx<()>, _timer: TimerId, key: u64) {
        let mut spin = 0u64;
        for round in 0..self.work {
            spin = std::hint::black_box(spin.wrapping_add(round));
        }
        let conn = self.conn.expect("armed after accept");
        ctx.send(conn, Bytes::from(vec![key as u8])).unwrap();
        if key + 1 < TICKS {
            ctx.arm_timer(self.period, key + 1);
        } else {
            ctx.close(conn);
        }
        self.fired.fetch_add(1, Ordering::SeqCst);
    }
}

/// A one-shard config on a fresh manual clock with `write_interval` and `write_pacing`.
fn manual_config(write_interval: Duration, pacing: WritePacing) -> (RuntimeConfig, ManualClock) {
    let clock = ManualClock::new();
    let mut config = common::config(1);
    config.write_interval = write_interval;
    config.write_pacing = pacing;
    config.clock = Clock::Manual(clock.clone());
    (config, clock)
}

/// How a ticker run is set up.
#[derive(Clone, Copy)]
struct TickerRun {
    write_interval: Duration,
    pacing: WritePacing,
    period: Duration,
    work: u64,
}

/// A 1 ms ticker doing no work under fixed pacing at `write_interval`.
fn fixed(write_interval: Duration) -> TickerRun {
    TickerRun {
        write_interval,
        pacing: WritePacing::Fixed,
        period: Duration::from_millis(1),
        work: 0,
    }
}

/// A ticker of `period` spinning `work` rounds per tick under adaptive pacing.
fn adaptive(write_interval: Duration, period: Duration, work: u64) -> TickerRun {
    TickerRun {
        write_interval,
        pacing: WritePacing::Adaptive,
        period,
        work,
    }
}

/// The bytes the ticker sent and the writes the runtime made, one tick per period the clock
/// is advanced; `None` when the backend is unavailable.
fn run_ticker(run: TickerRun) -> Option<(Vec<u8>, u64)> {
    let (config, clock) = manual_config(run.write_interval, run.pacing);
    let fired = Arc::new(AtomicU64::new(0));
    let for_shard = Arc::clone(&fired);
    let handle = common::start(config, move |_| Ticker {
        conn: None,
        fired: Arc::clone(&for_shard),
        period: run.period,
        work: run.work,
    })?;
    let mut stream = common::client(handle.local_addrs()[0]);
    common::wait_until("the first tick", || fired.load(Ordering::SeqCst) == 1);
    for tick in 2..=TICKS {
        clock.advance(run.period);
        common::wait_until("the next tick", || fired.load(Ordering::SeqCst) == tick);
    }
    let bytes = common::read_to_end(&mut stream);
    handle.shutdown();
    let writes = handle.join().unwrap().iter().map(|s| s.writes).sum();
    Some((bytes, writes))
}

#[test]
fn a_stream_leaves_in_few_writes_in_order() {
    let Some((bytes, paced_writes)) = run_ticker(fixed(Duration::from_millis(400))) else {
        return;
    };
    assert_eq!(bytes, (0..TICKS as u8).collect::<Vec<_>>());
    let (bytes, unpaced_writes) =
        run_ticker(fixed(Duration::ZERO)).expect("the backend started once");
    assert_eq!(bytes, (0..TICKS as u8).collect::<Vec<_>>());
    // 40 ticks of 1 ms fit in one 400 ms interval: the first two writes are sparse (one frame
    // each), the stream is held from the third tick and leaves with the close.
    assert_eq!(paced_writes, 3, "writes with pacing");
    // Without pacing every tick is a turn of its own, and a write.
    assert_eq!(unpaced_writes, TICKS, "writes without pacing");
}

#[test]
fn adaptive_pacing_holds_nothing_on_an_idle_shard() {
    // Ticks 400 ms apart on the manual clock and a 1 s interval (the longest): the hold a
    // busy shard gets (the whole second) makes the ticker a stream, and so does any hold over
    // 800 ms, which takes about 13 % of the core, 52 ms of CPU per tick; an idle shard uses
    // microseconds. The ticks are as far apart as that allows because the gauge reads the
    // thread's real CPU time: under qemu-user (the aarch64 cross step) a first pass through
    // code costs its translation, and ticks 100 ms apart once held a write there.
    let idle = adaptive(Duration::from_secs(1), Duration::from_millis(400), 0);
    let Some((bytes, writes)) = run_ticker(idle) else {
        return;
    };
    assert_eq!(bytes, (0..TICKS as u8).collect::<Vec<_>>());
    assert_eq!(writes, TICKS, "every tick written at once");
}

#[test]
fn adaptive_pacing_holds_a_stream_on_a_busy_shard() {
    // Each 1 ms tick of the manual clock costs the shard milliseconds of CPU (5M rounds of
    // arithmetic): the whole core by the gauge's reckoning, so after a few ticks the hold is
    // the whole 400 ms and the rest of the stream leaves with the close.
    let busy = adaptive(
        Duration::from_millis(400),
        Duration::from_millis(1),
        5_000_000,
    );
    let Some((bytes, writes)) = run_ticker(busy) else {
        return;
    };
    assert_eq!(bytes, (0..TICKS as u8).collect::<Vec<_>>());
    // The smoothed load passes 15 % of the core within 6 one-millisecond samples at 100 %;
    // the ticks before that (and one more, whose batch opened before the hold grew) are
    // written one by one.
    assert!(writes <= 12, "{writes} writes: the stream was not held");
}

/// Echoes each read back twice, as two frames (so each write carries more than one frame:
/// a stream, which pacing may hold); expedites them when `expedite`. Counts the reads.
struct PacedEcho {
    expedite: bool,
    seen: Arc<AtomicU64>,
}

impl Handler for PacedEcho {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        ctx.send(conn, data.clone()).unwrap();
        ctx.send(conn, data).unwrap();
        if self.expedite {
            ctx.expedite(conn);
        }
        self.seen.fetch_add(1, Ordering::SeqCst);
    }
}

/// A runtime echoing with [`PacedEcho`] under a 1 s interval on a manual clock.
struct Paced {
    handle: RuntimeHandle<()>,
    clock: ManualClock,
    seen: Arc<AtomicU64>,
}

fn start_paced(expedite: bool) -> Option<Paced> {
    let (config, clock) = manual_config(Duration::from_secs(1), WritePacing::Fixed);
    let seen = Arc::new(AtomicU64::new(0));
    let for_shard = Arc::clone(&seen);
    let handle = common::start(config, move |_| PacedEcho {
        expedite,
        seen: Arc::clone(&for_shard),
    })?;
    // Pacing counts microseconds from the shard's start, 0 meaning "never written": step off
    // the start so the first write's time is exact.
    clock.advance(Duration::from_millis(1));
    Some(Paced {
        handle,
        clock,
        seen,
    })
}

/// Fails if anything arrives on `stream` within [`QUIET`].
fn expect_nothing(stream: &mut TcpStream) {
    stream.set_read_timeout(Some(QUIET)).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(n) => panic!("a held write left early ({n} bytes: {byte:?})"),
        Err(e) => assert!(
            matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "read failed: {e}"
        ),
    }
    stream.set_read_timeout(Some(common::HANG)).unwrap();
}

#[test]
fn expedited_frames_are_not_held() {
    let Some(paced) = start_paced(true) else {
        return;
    };
    // The clock never moves: a held write would never leave (and the read would fail).
    let mut stream = common::client(paced.handle.local_addrs()[0]);
    for round in 0..5u8 {
        common::write_all(&mut stream, &[round]);
        assert_eq!(common::read_exact(&mut stream, 2), [round, round]);
    }
}

#[test]
fn a_held_write_leaves_when_its_interval_ends_and_at_shutdown() {
    let Some(paced) = start_paced(false) else {
        return;
    };
    let mut stream = common::client(paced.handle.local_addrs()[0]);
    common::write_all(&mut stream, b"a");
    assert_eq!(common::read_exact(&mut stream, 2), b"aa");
    // Written less than the interval ago, with two frames (a stream): held...
    common::write_all(&mut stream, b"b");
    common::wait_until("the echo of b", || paced.seen.load(Ordering::SeqCst) == 2);
    paced.clock.advance(Duration::from_millis(999));
    expect_nothing(&mut stream);
    // ...until the interval ends.
    paced.clock.advance(Duration::from_millis(1));
    assert_eq!(common::read_exact(&mut stream, 2), b"bb");
    // Held again (written just now), and a shutdown drains it at once, clock unmoved.
    common::write_all(&mut stream, b"c");
    common::wait_until("the echo of c", || paced.seen.load(Ordering::SeqCst) == 3);
    expect_nothing(&mut stream);
    paced.handle.shutdown();
    assert_eq!(common::read_to_end(&mut stream), b"cc");
    paced.handle.join().unwrap();
}

/// Echoes each read back as one frame: sparse traffic.
struct SingleEcho;

impl Handler for SingleEcho {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        ctx.send(conn, data).unwrap();
    }
}

#[test]
fn sparse_traffic_is_never_held() {
    // A request now and then: more than half the 1 s interval apart, one frame per write. The
    // clock moves only between requests, so a held answer would never come.
    let (config, clock) = manual_config(Duration::from_secs(1), WritePacing::Fixed);
    let Some(handle) = common::start(config, |_| SingleEcho) else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    for round in 0..3u8 {
        clock.advance(Duration::from_millis(600));
        common::write_all(&mut stream, &[round]);
        assert_eq!(common::read_exact(&mut stream, 1), [round]);
    }
}
