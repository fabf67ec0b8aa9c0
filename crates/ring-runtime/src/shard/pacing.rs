//! Write pacing (`RuntimeConfig::write_interval`): a connection written less than the interval
//! ago waits, with the frames it gathers meanwhile, until the interval has passed or a full
//! batch waits. Waiting connections sit in one list; when the earliest is due, all of them are
//! marked dirty again and each either writes or goes back to waiting. A connection the handler
//! expedited (a peer waits on what it queued) is never held, nor is a sparse one: its last
//! write carried a single frame and came at least half an interval after the one before.
//! Pacing stretches only streams, so traffic that arrives now and then (a request and its
//! response, a message every interval or so) never waits.

use std::time::{Duration, Instant};

use crate::conn::{Conn, ConnTable, Phase};
use crate::ids::ConnId;

pub(super) struct Pacing {
    interval_us: u32,
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
        Self {
            interval_us: u32::try_from(config.write_interval.as_micros()).unwrap_or(u32::MAX),
            batch_bytes: config.write_batch_bytes,
            epoch: now,
            waiting: Vec::new(),
            next_due: None,
            clock_cache: (now, 0),
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
                conn.paced = false;
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
        if self.interval_us == 0
            || closing
            || conn.expedite
            || !conn.dense
            || conn.last_write_us == 0
            || conn.phase != Phase::Open
            || conn.close.is_some()
            || conn.shutdown_write_requested
            || queued_bytes >= self.batch_bytes
        {
            return false;
        }
        let elapsed = self.clock(now).wrapping_sub(conn.last_write_us);
        if elapsed >= self.interval_us {
            return false;
        }
        let due = now + Duration::from_micros(u64::from(self.interval_us - elapsed));
        self.next_due = Some(self.next_due.map_or(due, |d| d.min(due)));
        if !conn.paced {
            conn.paced = true;
            self.waiting.push(id);
        }
        true
    }

    /// Records that `conn`'s write of `frames` frames starts now.
    pub(super) fn wrote(&mut self, conn: &mut Conn, now: Instant, frames: u32) {
        conn.expedite = false;
        if self.interval_us != 0 {
            let clock = self.clock(now).max(1);
            let gap = clock.wrapping_sub(conn.last_write_us);
            let frequent = conn.last_write_us != 0 && gap < self.interval_us / 2;
            conn.dense = frames > 1 || frequent;
            conn.last_write_us = clock;
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
