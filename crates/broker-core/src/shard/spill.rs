//! Stored queues beyond memory: a stored session keeps at most
//! `persistence.memory_queue_messages` queued copies in memory; later copies go to disk only
//! (`SpilledQueue`), and are read back through the store thread as the in-memory part drains.
//! Every disk-only copy has a higher sequence number than every in-memory one, so a read of
//! "the next ones above `after`" returns exactly the disk-only tail, in order.

use codec::MqttStr;
use router::SubscriberId;
use session_store::storage::SessionWrite;
use session_store::{OverflowPolicy, Pushed, SpilledQueue};

use super::durability::Durability;
use super::parts::Figures;
use super::{BrokerShard, Ctx};
use crate::metrics::DropReason;
use crate::session::Sessions;
use crate::store::{QueueReadDone, outgoing_from_stored};
use ring_runtime::ShardId;
use session_store::QueueLimits;

impl BrokerShard {
    /// Queues a stored copy on disk only (`queued` is its `MessageQueued`), within the
    /// session's whole-queue bound (`queues.max_queued_messages`, memory and disk together).
    pub(super) fn enqueue_on_disk(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        seq: u64,
        queued: SessionWrite,
    ) {
        let limits = &self.shared.limits.queues;
        let Some(session) = self.sessions.get_mut(client_id) else {
            return;
        };
        let on_disk = session.spilled().map_or(0, |s| s.on_disk);
        if session.queue.len() as u64 + on_disk >= limits.max_len as u64 {
            let oldest = match limits.policy {
                OverflowPolicy::DropOldest => session.queue.pop(),
                OverflowPolicy::Refuse => None,
            };
            let conn = session.conn;
            self.figures.count_dropped(DropReason::QueueFull, 1);
            match oldest {
                Some(oldest) => self.durable.forget_stored_copies(client_id, &[oldest]),
                None => {
                    if let Some(conn) = conn.filter(|_| limits.policy == OverflowPolicy::Refuse) {
                        self.wire().disconnect_slow_consumer(ctx, client_id, conn);
                    }
                    return;
                }
            }
        }
        self.durable.record(queued);
        let Some(session) = self.sessions.get_mut(client_id) else {
            return;
        };
        match session.spilled_mut() {
            Some(spilled) => {
                spilled.on_disk += 1;
                spilled.written_since_read += 1;
            }
            None => session.set_spilled(Some(SpilledQueue {
                on_disk: 1,
                after: seq - 1,
                reading: None,
                written_since_read: 1,
            })),
        }
    }

    /// Takes the reads the store thread finished: their messages join the in-memory queues.
    pub(super) fn take_queue_reads(&mut self, ctx: &mut Ctx) {
        if self.durable.queue_reads.reads_outstanding == 0 {
            return;
        }
        let Some(store) = self.shared.persistence.store.clone() else {
            return;
        };
        let done = store.take_reads(self.id);
        self.durable.queue_reads.reads_outstanding = self
            .durable
            .queue_reads
            .reads_outstanding
            .saturating_sub(done.len());
        for done in done {
            let Some(done) = self.release_read_done(ctx, done) else {
                continue;
            };
            let client_id = done.client_id.clone();
            if self.durable.refill(
                &mut self.sessions,
                &self.figures,
                &self.shared.limits.queues,
                ctx,
                done,
            ) {
                self.drain_session(ctx, &client_id);
            }
        }
    }
}

impl Durability {
    /// Asks for the next part of the on-disk queue once the in-memory part is half empty.
    /// (`limit`: `persistence.memory_queue_messages`; the read's answer comes to `shard`.)
    pub(super) fn refill_from_disk_if_low(
        &mut self,
        sessions: &mut Sessions,
        shard: ShardId,
        limit: usize,
        subscriber: SubscriberId,
    ) {
        let Some(session) = sessions.by_subscriber_mut(subscriber) else {
            return;
        };
        let in_memory = session.queue.len();
        let Some(spilled) = session.spilled_mut() else {
            return;
        };
        if spilled.reading.is_some() || in_memory > limit / 2 {
            return;
        }
        let after = spilled.after;
        spilled.written_since_read = 0;
        let client_id = session.client_id.clone();
        let id = self.request_read(shard, client_id, after, limit - in_memory);
        if let Some(spilled) = sessions
            .by_subscriber_mut(subscriber)
            .and_then(|s| s.spilled_mut())
        {
            spilled.reading = Some(id);
        }
    }

    /// Appends a read's messages to the session's in-memory queue; false for a stale read.
    fn refill(
        &mut self,
        sessions: &mut Sessions,
        figures: &Figures,
        limits: &QueueLimits,
        ctx: &mut Ctx,
        done: QueueReadDone,
    ) -> bool {
        let now = ctx.now();
        let Some(session) = sessions.get_mut(&done.client_id) else {
            return false;
        };
        if session.spilled().and_then(|s| s.reading) != Some(done.id) {
            return false;
        }
        let read = done.messages.len();
        let mut after = None;
        let mut dropped = Vec::new();
        for (seq, stored) in &done.messages {
            after = Some(*seq);
            let Some(outgoing) = outgoing_from_stored(stored, *seq, now) else {
                continue;
            };
            match session.queue.push(outgoing, limits) {
                Pushed::Queued => {}
                Pushed::DroppedOldest(older) => dropped.extend(older),
                Pushed::Refused {
                    message,
                    dropped: older,
                } => {
                    dropped.extend(older);
                    dropped.push(message);
                }
            }
        }
        let spilled = session.spilled_mut().expect("invariant: checked above");
        spilled.reading = None;
        if let Some(after) = after {
            spilled.after = after;
        }
        // A short read saw the whole disk tail as it was when asked: what is on disk now is
        // what was written since.
        spilled.on_disk = if read < done.limit {
            spilled.written_since_read
        } else {
            spilled.on_disk.saturating_sub(read as u64)
        };
        if spilled.on_disk == 0 {
            session.set_spilled(None);
        }
        figures.count_dropped(DropReason::QueueFull, dropped.len() as u64);
        self.forget_stored_copies(&done.client_id, &dropped);
        true
    }
}
