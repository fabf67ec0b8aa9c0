//! Slow subscribers on this shard (`crate::slow`): deliveries over the threshold and drops are
//! noted as they happen; the rankings (with queue depth from a walk over the sessions) are
//! published for `/metrics` on the gauge tick and answered to the admin API on request.

use std::time::Instant;

use ring_runtime::ConnId;

use super::parts::Figures;
use super::{BrokerShard, Ctx};
use crate::session::{Session, SessionAt, Sessions};
use crate::slow::{QueueRow, SlowReport};

impl Figures {
    /// A QoS 1/2 copy received in the turn of `received_ns` was acknowledged now by
    /// `client_id` (PUBACK or PUBREC): noted when it was slow. 0: not measured.
    pub(super) fn note_acknowledged(&mut self, ctx: &Ctx, client_id: &str, received_ns: u64) {
        if received_ns == 0 || self.slow.top() == 0 {
            return;
        }
        let latency = self.turn_nanos(ctx).saturating_sub(received_ns);
        if self.slow.is_slow(latency) {
            self.slow.note_latency(client_id, latency, ctx.now());
        }
    }

    /// This shard's rankings now, queue depth included.
    pub(super) fn slow_report(&mut self, sessions: &Sessions, now: Instant) -> SlowReport {
        self.slow.expire(now);
        let mut report = self.slow.report(now);
        let top = self.slow.top();
        if top > 0 {
            report.by_queue = deepest_queues(sessions, top);
        }
        report
    }

    /// Publishes this shard's rankings for `/metrics` (the gauge tick).
    pub(super) fn publish_slow_report(&mut self, sessions: &Sessions, now: Instant) {
        if self.slow.top() == 0 {
            return;
        }
        let report = self.slow_report(sessions, now);
        let mut slot = self
            .detail()
            .slow
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = report;
    }
}

/// The `top` sessions with the most copies queued (in memory and on disk), deepest first:
/// one walk keeping at most `top` candidates, a client id copied only for those kept.
fn deepest_queues(sessions: &Sessions, top: usize) -> Vec<QueueRow> {
    use std::cmp::Reverse;
    let queued =
        |s: &Session| (s.queue.len() + s.spilled().map_or(0, |d| d.on_disk as usize)) as u64;
    // A min-heap on (depth, reversed id): its top is the candidate a deeper queue replaces;
    // among equal depths the larger client id goes first, as the ranking orders ties by id.
    // Client ids are unique, so the inflight count last in the key never decides.
    let mut kept = std::collections::BinaryHeap::with_capacity(top + 1);
    for session in sessions.iter() {
        let depth = queued(session);
        if depth == 0 {
            continue;
        }
        let key = (
            depth,
            Reverse(session.client_id.as_str()),
            session.inflight.len(),
        );
        if kept.len() == top && kept.peek().is_some_and(|Reverse(least)| *least >= key) {
            continue;
        }
        kept.push(Reverse(key));
        if kept.len() > top {
            kept.pop();
        }
    }
    kept.into_sorted_vec()
        .into_iter()
        .map(|Reverse((depth, Reverse(id), inflight))| QueueRow {
            client_id: id.to_owned(),
            queued: depth,
            inflight: inflight as u64,
        })
        .collect()
}

impl BrokerShard {
    /// A QoS 0 copy written to `conn` `latency_ns` after its PUBLISH's turn: noted when slow.
    pub(super) fn note_qos0_latency(&mut self, ctx: &Ctx, conn: ConnId, latency_ns: u64) {
        if !self.figures.slow.is_slow(latency_ns) {
            return;
        }
        let session = (self.conns.get(&conn).and_then(|c| c.session()))
            .and_then(|subscriber| self.sessions.by_subscriber(subscriber));
        if let Some(session) = session {
            let client_id = session.client_id.as_str();
            self.figures
                .slow
                .note_latency(client_id, latency_ns, ctx.now());
        }
    }

    /// `n` copies for the session at `at` were dropped.
    pub(super) fn note_session_drops(&mut self, ctx: &Ctx, at: SessionAt, n: u64) {
        if n == 0 || self.figures.slow.top() == 0 {
            return;
        }
        if let Some(session) = self.sessions.at(at) {
            let client_id = session.client_id.as_str();
            self.figures.slow.note_drops(client_id, n, ctx.now());
        }
    }

    /// A copy for `conn` was dropped (its send queue was full).
    pub(super) fn note_connection_drop(&mut self, ctx: &Ctx, conn: ConnId) {
        if self.figures.slow.top() == 0 {
            return;
        }
        let session = (self.conns.get(&conn).and_then(|c| c.session()))
            .and_then(|subscriber| self.sessions.by_subscriber(subscriber));
        if let Some(session) = session {
            let client_id = session.client_id.as_str();
            self.figures.slow.note_drops(client_id, 1, ctx.now());
        }
    }
}
