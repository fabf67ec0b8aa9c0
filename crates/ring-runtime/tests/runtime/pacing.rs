//! Write pacing (`RuntimeConfig::write_interval`): a stream of frames to one connection leaves
//! in a few writes; expedited frames, sparse traffic and a shutdown are never held.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ring_runtime::{ConnId, Handler, RuntimeConfig, ShardCtx, TimerId};

use crate::common;

/// Frames the ticker sends, one per timer firing.
const TICKS: u64 = 40;

/// Sends one byte per 1 ms timer tick, `TICKS` times, then closes.
struct Ticker {
    conn: Option<ConnId>,
}

impl Handler for Ticker {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, _peer: SocketAddr) {
        self.conn = Some(conn);
        ctx.arm_timer(Duration::ZERO, 0);
    }

    fn on_data(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _data: Bytes) {}

    fn on_timer(&mut self, ctx: &mut ShardCtx<()>, _timer: TimerId, key: u64) {
        let conn = self.conn.expect("armed after accept");
        ctx.send(conn, Bytes::from(vec![key as u8])).unwrap();
        if key + 1 < TICKS {
            ctx.arm_timer(Duration::from_millis(1), key + 1);
        } else {
            ctx.close(conn);
        }
    }
}

/// The bytes the ticker sent, and the writes the runtime made.
fn run_ticker(write_interval: Duration) -> (Vec<u8>, u64) {
    let mut config = common::config(1);
    config.write_interval = write_interval;
    let Some(handle) = common::start(config, |_| Ticker { conn: None }) else {
        return ((0..TICKS as u8).collect(), 0);
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    let bytes = common::read_to_end(&mut stream);
    handle.shutdown();
    let writes = handle.join().unwrap().iter().map(|s| s.writes).sum();
    (bytes, writes)
}

#[test]
fn a_stream_leaves_in_few_writes_in_order() {
    let (bytes, paced_writes) = run_ticker(Duration::from_millis(400));
    assert_eq!(bytes, (0..TICKS as u8).collect::<Vec<_>>());
    let (bytes, unpaced_writes) = run_ticker(Duration::ZERO);
    assert_eq!(bytes, (0..TICKS as u8).collect::<Vec<_>>());
    println!("writes: paced {paced_writes}, unpaced {unpaced_writes}");
    // 40 ticks of 1 ms fit in one 400 ms interval: the first write, one for the rest and the
    // close. Without pacing each tick (or each few, on a busy machine) is a write.
    assert!(paced_writes <= 4, "{paced_writes} writes with pacing");
    assert!(
        unpaced_writes > paced_writes * 2,
        "{unpaced_writes} without"
    );
}

/// Echoes each read back twice, as two frames (so each write carries more than one frame:
/// a stream, which pacing may hold); expedites them when `expedite`.
struct PacedEcho {
    expedite: bool,
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
    }
}

fn paced_config() -> RuntimeConfig {
    let mut config = common::config(1);
    // Far longer than the client's read timeout: a held write would fail the test.
    config.write_interval = Duration::from_secs(1);
    config
}

/// A client whose reads fail after `timeout` (shorter than the pacing interval).
fn impatient_client(handle: &ring_runtime::RuntimeHandle<()>, timeout: Duration) -> TcpStream {
    let stream = common::client(handle.local_addrs()[0]);
    stream.set_read_timeout(Some(timeout)).unwrap();
    stream
}

#[test]
fn expedited_frames_are_not_held() {
    let Some(handle) = common::start(paced_config(), |_| PacedEcho { expedite: true }) else {
        return;
    };
    let mut stream = impatient_client(&handle, Duration::from_millis(700));
    for round in 0..5u8 {
        common::write_all(&mut stream, &[round]);
        assert_eq!(common::read_exact(&mut stream, 2), [round, round]);
    }
}

#[test]
fn a_held_write_leaves_when_its_interval_ends_and_at_shutdown() {
    let Some(handle) = common::start(paced_config(), |_| PacedEcho { expedite: false }) else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    common::write_all(&mut stream, b"a");
    assert_eq!(common::read_exact(&mut stream, 2), b"aa");
    // Written less than the interval ago, with two frames (a stream): held until the
    // interval ends.
    let sent = Instant::now();
    common::write_all(&mut stream, b"b");
    assert_eq!(common::read_exact(&mut stream, 2), b"bb");
    println!("held for {:?}", sent.elapsed());
    common::write_all(&mut stream, b"c");
    // Shutdown drains at once, whatever the pacing.
    std::thread::sleep(Duration::from_millis(50));
    handle.shutdown();
    stream
        .set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    assert_eq!(common::read_to_end(&mut stream), b"cc");
    handle.join().unwrap();
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
    // A request now and then: more than half the 1 s interval apart, one frame per write. A
    // held answer would come 400 ms late, past the read timeout.
    let Some(handle) = common::start(paced_config(), |_| SingleEcho) else {
        return;
    };
    let mut stream = impatient_client(&handle, Duration::from_millis(300));
    for round in 0..3u8 {
        std::thread::sleep(Duration::from_millis(600));
        common::write_all(&mut stream, &[round]);
        assert_eq!(common::read_exact(&mut stream, 1), [round]);
    }
}
