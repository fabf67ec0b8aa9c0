//! Write pacing (`RuntimeConfig::write_interval`, `RuntimeConfig::write_pacing`): a connection
//! written less than the current hold ago waits, with the frames it gathers meanwhile, until the
//! hold has passed or a full batch waits. The hold is the whole interval under fixed pacing;
//! under adaptive pacing it follows the shard's load (`load.rs`), zero while the shard has idle
//! time. Waiting connections sit in one list; when the earliest is due, all of them are marked
//! dirty again and each either writes or goes back to waiting. A connection the handler
//! expedited (a peer waits on what it queued) is never held, nor is a sparse one: its last
//! write carried a single frame and came at least half a hold after the one before. Pacing
//! stretches only streams, so traffic that arrives now and then (a request and its response, a
//! message every hold or so) never waits.

use std::time::{Duration, Instant};

use super::load::{self, LoadGauge};
use crate::WritePacing;
use crate::conn::{Conn, ConnTable, Phase};
use crate::ids::ConnId;
use crate::sys::cpu_time::thread_cpu_time;

pub(super) struct Pacing {
    /// The configured interval: the longest hold (0: pacing off).
    max_us: u32,
    /// The hold now in force.
    hold_us: u32,
    /// Present under adaptive pacing: what sets the hold.
    gauge: Option<LoadGauge>,
    batch_bytes: usize,
    epoch: Instant,
    waiting: Vec<ConnId>,
    next_due: Option<Instant>,
    /// The last `now` converted by [`Self::clock`] and its value: every connection of a turn
    /// asks with the turn's `now`, so it is converted once per turn, not once per write.
    clock_cache: (Instant, u32),
}

impl Pacing {
    pub(super) fn new(config: &crate::RuntimeConfig, now: Instant) -> Self {
        let max_us = u32::try_from(config.write_interval.as_micros()).unwrap_or(u32::MAX);
        let adaptive = config.write_pacing == WritePacing::Adaptive && max_us != 0;
        Self {
            max_us,
            hold_us: if adaptive { 0 } else { max_us },
            gauge: adaptive.then(|| LoadGauge::new(thread_cpu_time)),
            batch_bytes: config.write_batch_bytes,
            epoch: now,
            waiting: Vec::new(),
            next_due: None,
            clock_cache: (now, 0),
        }
    }

    /// At the start of a turn, under adaptive pacing: the hold follows the shard's load
    /// (`busy_ns`: the shard's busy time so far, `ShardStats::busy_ns`).
    pub(super) fn adapt(&mut self, now: Instant, busy_ns: u64) {
        let busy = Duration::from_nanos(busy_ns);
        if let Some(utilization) = self.gauge.as_mut().and_then(|g| g.sample(now, busy)) {
            self.hold_us = load::hold_us(utilization, self.max_us);
        }
    }

    /// When the earliest waiting connection is due, if one waits.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.next_due
    }

    /// Marks every waiting connection dirty once the earliest is due.
    pub(super) fn release_due(&mut self, conns: &mut ConnTable, now: Instant) {
        if self.next_due.is_none_or(|due| now < due) {
            return;
        }
        self.next_due = None;
        for id in self.waiting.drain(..) {
            if let Some(conn) = conns.get_mut(id) {
                conn.pacing.paced = false;
                conns.mark_dirty(id);
            }
        }
    }

    /// Whether `conn`'s next write waits; if so it joins the waiting list. Never for a closing
    /// connection, during shutdown, or with a full batch waiting.
    pub(super) fn holds(
        &mut self,
        id: ConnId,
        conn: &mut Conn,
        now: Instant,
        closing: bool,
        queued_bytes: usize,
    ) -> bool {
        if self.hold_us == 0
            || closing
            || conn.pacing.expedite
            || !conn.pacing.dense
            || conn.pacing.last_write_us == 0
            || conn.phase != Phase::Open
            || conn.close.is_some()
            || conn.io.shutdown_write_requested
            || queued_bytes >= self.batch_bytes
        {
            return false;
        }
        let elapsed = self.clock(now).wrapping_sub(conn.pacing.last_write_us);
        if elapsed >= self.hold_us {
            return false;
        }
        let due = now + Duration::from_micros(u64::from(self.hold_us - elapsed));
        self.next_due = Some(self.next_due.map_or(due, |d| d.min(due)));
        if !conn.pacing.paced {
            conn.pacing.paced = true;
            self.waiting.push(id);
        }
        true
    }

    /// Records that `conn`'s write of `frames` frames starts now.
    pub(super) fn wrote(&mut self, conn: &mut Conn, now: Instant, frames: u32) {
        conn.pacing.expedite = false;
        if self.max_us != 0 {
            let clock = self.clock(now).max(1);
            let gap = clock.wrapping_sub(conn.pacing.last_write_us);
            let frequent = conn.pacing.last_write_us != 0 && gap < self.hold_us / 2;
            conn.pacing.dense = frames > 1 || frequent;
            conn.pacing.last_write_us = clock;
        }
    }

    /// Microseconds since the shard started, wrapping (only differences under the interval
    /// matter).
    fn clock(&mut self, now: Instant) -> u32 {
        if self.clock_cache.0 != now {
            let micros = now.saturating_duration_since(self.epoch).as_micros() as u32;
            self.clock_cache = (now, micros);
        }
        self.clock_cache.1
    }
}

#[cfg(test)]
#[path = "pacing_tests.rs"]
mod tests;
