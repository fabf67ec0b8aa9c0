//! Which writes pacing holds, on synthetic arrival times: a connection's frames arrive at given
//! offsets from a start, each turn asks `holds`, and what is not held (or whose hold has
//! passed) is written there and then.

use std::time::{Duration, Instant};

use super::Pacing;
use crate::conn::Conn;
use crate::ids::ConnId;
use crate::{RuntimeConfig, WritePacing};

const HOLD: Duration = Duration::from_millis(10);

/// Fixed pacing at a 10 ms hold, and one open connection.
fn setup() -> (Pacing, Conn, Instant) {
    let config = RuntimeConfig {
        write_interval: HOLD,
        write_pacing: WritePacing::Fixed,
        ..RuntimeConfig::default()
    };
    let start = Instant::now();
    (Pacing::new(&config, start), Conn::simulated(), start)
}

/// Feeds frames arriving at `arrivals` (milliseconds after the start, ascending), one turn
/// per arrival plus turns when held batches are due; returns each write as (when, frames).
fn writes_for(arrivals: &[f64]) -> Vec<(f64, u32)> {
    let (mut pacing, mut conn, start) = setup();
    let id = ConnId::new(0, 0);
    let at = |ms: f64| start + Duration::from_secs_f64((ms + 1.0) / 1000.0);
    let mut writes = Vec::new();
    let mut waiting = 0u32;
    let mut next = arrivals.iter().copied().peekable();
    loop {
        let due = pacing.next_due().filter(|_| waiting > 0);
        let arrival = next.peek().map(|&ms| at(ms));
        let now = match (arrival, due) {
            (Some(arrival), Some(due)) => arrival.min(due),
            (Some(arrival), None) => arrival,
            (None, Some(due)) => due,
            (None, None) => break,
        };
        if arrival == Some(now) {
            next.next();
            waiting += 1;
        }
        if due.is_some_and(|due| due <= now) {
            pacing.next_due = None;
            pacing.waiting.clear();
            conn.pacing.paced = false;
        }
        if !pacing.holds(id, &mut conn, now, false, 0) {
            pacing.wrote(&mut conn, now, waiting);
            let ms = now.duration_since(start).as_secs_f64() * 1000.0 - 1.0;
            writes.push(((ms * 10.0).round() / 10.0, waiting));
            waiting = 0;
        }
    }
    writes
}

#[test]
fn sparse_traffic_is_written_at_once() {
    let arrivals: Vec<f64> = (0..10).map(|i| f64::from(i) * 20.0).collect();
    let writes = writes_for(&arrivals);
    assert_eq!(writes.len(), 10, "{writes:?}");
    assert!(writes.iter().all(|&(_, frames)| frames == 1), "{writes:?}");
}

#[test]
fn a_stream_is_held_into_one_write_per_hold() {
    // A frame every 0.5 ms for 50 ms: the first two are written alone (the second write comes
    // half a millisecond after the first: a stream), and from then on one write per 10 ms
    // hold carries about 20 frames.
    let arrivals: Vec<f64> = (0..100).map(|i| f64::from(i) * 0.5).collect();
    let writes = writes_for(&arrivals);
    assert_eq!(writes[..2], [(0.0, 1), (0.5, 1)]);
    assert!(writes.len() <= 8, "{writes:?}");
    assert!(
        writes[2..writes.len() - 1].iter().all(|&(_, f)| f >= 19),
        "{writes:?}"
    );
}

#[test]
fn adaptive_pacing_holds_nothing_until_the_gauge_reports_load() {
    let config = RuntimeConfig {
        write_interval: HOLD,
        write_pacing: WritePacing::Adaptive,
        ..RuntimeConfig::default()
    };
    let start = Instant::now();
    let mut pacing = Pacing::new(&config, start);
    let mut conn = Conn::simulated();
    let id = ConnId::new(0, 0);
    // A burst of frames every turn: a stream, but the hold starts at zero.
    for turn in 1..=5u32 {
        let now = start + Duration::from_micros(u64::from(turn) * 100);
        assert!(!pacing.holds(id, &mut conn, now, false, 0), "turn {turn}");
        pacing.wrote(&mut conn, now, 5);
    }
    assert!(conn.pacing.dense, "classified as a stream all along");
}
