//! This shard's labelled figures for `/metrics` (`crate::metrics::ShardDetail`): PUBLISH
//! packets in and out by QoS, drops by reason, connections by listener, the loop's turns and
//! busy time, queue gauges, and the delivery latency histogram. Each write is a relaxed add to
//! this shard's own block. Posts to other shards go through [`Figures::post`], which counts
//! the deliveries a full mailbox drops.

use ring_runtime::ConnId;

use super::Ctx;
use super::parts::{Door, Figures};
use crate::message::{CopyView, ShardMsg};
use crate::metrics::{DropReason, Listener, ShardCounters, ShardDetail, qos_index};
use crate::session::Sessions;
use tracing::debug;

impl Figures {
    /// This shard's counters.
    pub(super) fn counters(&self) -> &ShardCounters {
        self.metrics.shard(self.index)
    }

    /// This shard's labelled figures.
    pub(super) fn detail(&self) -> &ShardDetail {
        self.metrics.detail(self.index)
    }

    /// Counts `n` dropped copies under `reason` (and in the `messages_dropped` total).
    pub(super) fn count_dropped(&self, reason: DropReason, n: u64) {
        if n == 0 {
            return;
        }
        ShardCounters::add(&self.counters().messages_dropped, n);
        // The total first, then its reason: a scrape reads the reasons before the total
        // (ringmq's `ops_port/collect.rs`), so the reasons it shows never add up to more than the
        // total.
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        ShardCounters::add(&self.detail().dropped[reason.index()], n);
        if let Some(hook) = &self.drop_events {
            let reason = reason.label();
            hook.post(broker_api::BrokerEvent::MessageDropped { reason, count: n });
        }
    }

    /// Counts a connection refused before login.
    pub(super) fn count_refusal(&self, refusal: crate::metrics::Refusal) {
        ShardCounters::add(&self.detail().refused[refusal.index()], 1);
    }

    /// Counts a PUBLISH received from a client.
    pub(super) fn count_received(&self, qos: codec::QoS, payload_len: usize) {
        let detail = self.detail();
        let q = qos_index(qos);
        ShardCounters::add(&detail.received[q], 1);
        ShardCounters::add(&detail.received_payload_bytes[q], payload_len as u64);
    }

    /// Counts a PUBLISH frame of `len` bytes queued on a connection; a first send of a live
    /// copy also records its delivery latency on the turn clock. Re-sends (DUP) and copies
    /// sent with RETAIN set (retained messages for a new subscription, retain-as-published
    /// copies) are not measured: their age is not delivery latency. The latency measured, 0
    /// when not.
    #[inline]
    pub(super) fn count_sent(
        &mut self,
        ctx: &Ctx,
        copy: CopyView<'_>,
        dup: bool,
        len: usize,
    ) -> u64 {
        let received = copy.message.received_ns;
        let measured = received != 0 && !dup && !copy.retain;
        let now = if measured { self.turn_nanos(ctx) } else { 0 };
        let (counters, detail) = self.metrics.block(self.index);
        ShardCounters::add(&counters.messages_sent, 1);
        ShardCounters::add(&counters.bytes_sent, len as u64);
        let q = qos_index(copy.qos);
        ShardCounters::add(&detail.sent[q], 1);
        let payload = copy.message.publish.payload().len() as u64;
        ShardCounters::add(&detail.sent_payload_bytes[q], payload);
        if !measured {
            return 0;
        }
        let latency = now.saturating_sub(received);
        detail.delivery_latency.record_nanos(latency);
        latency
    }

    /// This turn's `ctx.now()` in nanoseconds since the broker started: converted once per
    /// turn, then compared, so the per-message cost is one `Instant` comparison.
    #[inline]
    pub(super) fn turn_nanos(&mut self, ctx: &Ctx) -> u64 {
        let now = ctx.now();
        if self.turn_clock.0 != now {
            let since = now.saturating_duration_since(self.started);
            // At least 1: 0 stands for "not measured".
            let nanos = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX).max(1);
            self.turn_clock = (now, nanos);
        }
        self.turn_clock.1
    }

    /// Copies the runtime's turn count and busy time into this shard's block (every turn).
    pub(super) fn copy_turn_stats(&self, ctx: &Ctx) {
        let stats = ctx.stats();
        let detail = self.detail();
        ShardCounters::set(&detail.turns, stats.turns);
        ShardCounters::set(&detail.busy_ns, stats.busy_ns);
        ShardCounters::set(
            &self.counters().input_fences_expired,
            stats.input_fences_expired,
        );
    }

    /// Posts to a shard, in the lane the message needs:
    /// - deliveries are data: over the runtime's mailbox bound they are dropped and counted
    ///   (`deliveries_dropped_mailbox_full`);
    /// - a fence must arrive behind the copies it fences: the ordered lane, never refused;
    /// - replicated changes, hand-overs and wake-ups must neither be lost (one lost change
    ///   stops replication for good) nor wait behind a flood of deliveries: the urgent lane.
    ///
    /// False when the message was not posted. Posting goes through the figures because what a
    /// mailbox refuses is counted.
    pub(super) fn post(
        &self,
        ctx: &mut Ctx,
        shard: ring_runtime::ShardId,
        message: ShardMsg,
    ) -> bool {
        let copies = match &message {
            ShardMsg::Deliver { copies, .. } => copies.len() as u64,
            ShardMsg::Fence { .. } => {
                let posted = ctx.post_reliable(shard, message);
                return log_unposted(posted, shard);
            }
            _ => {
                let posted = ctx.post_urgent(shard, message);
                return log_unposted(posted, shard);
            }
        };
        if let Err(error) = ctx.post(shard, message) {
            debug!(%error, %shard, copies, "deliveries dropped: mailbox bound exceeded");
            ShardCounters::add(&self.counters().deliveries_dropped_mailbox_full, copies);
            self.count_dropped(DropReason::MailboxFull, copies);
            return false;
        }
        true
    }

    /// Recounts the copies in flight and queued in memory over this shard's sessions: a walk
    /// over every session, so only on the gauge tick (`sys.interval`, or every
    /// `GAUGE_INTERVAL` when only the operations listener wants it).
    pub(super) fn refresh_queue_gauges(&self, sessions: &Sessions) {
        let (inflight, queued) = sessions.iter().fold((0, 0), |(i, q), session| {
            (
                i + session.inflight.len() as u64,
                q + session.queue.len() as u64,
            )
        });
        let detail = self.detail();
        ShardCounters::set(&detail.inflight, inflight);
        ShardCounters::set(&detail.queued, queued);
    }
}

/// A never-refused post fails only for a shard that does not exist: a bug, logged.
fn log_unposted(
    posted: Result<(), ring_runtime::RuntimeError>,
    shard: ring_runtime::ShardId,
) -> bool {
    match posted {
        Ok(()) => true,
        Err(error) => {
            tracing::error!(%error, %shard, "control message to a shard that does not exist");
            false
        }
    }
}

impl Door {
    /// A connection accepted on a `kind` listener is now served by this shard.
    pub(super) fn connection_opened(&mut self, figures: &Figures, conn: ConnId, kind: Listener) {
        if kind != Listener::Tcp {
            self.listeners.insert(conn, kind);
        }
        ShardCounters::add(&figures.detail().connections[kind.index()], 1);
    }

    /// A connection counted by [`Self::connection_opened`] closed.
    pub(super) fn connection_ended(&mut self, figures: &Figures, conn: ConnId) {
        let kind = self.listeners.remove(&conn).unwrap_or(Listener::Tcp);
        ShardCounters::sub(&figures.detail().connections[kind.index()], 1);
    }
}
