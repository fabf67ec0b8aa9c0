//! Cross-shard mailboxes: one bounded crossbeam `ArrayQueue` of message batches per shard, and
//! a coalescing wake-up (eventfd + "wake pending" flag) so a burst of batches costs one
//! `write(2)` on the eventfd until the receiver drains.
//!
//! Protocol (the stress test below checks it):
//! * sender: `queue.push(batch)`, then `pending.swap(true)`; only the sender that flips the flag
//!   from `false` writes the eventfd.
//! * receiver: after its eventfd read completes, `pending.swap(false)` (acquire: it sees every
//!   push made before any sender's flip), then pops until empty. A push that lands after the
//!   swap flips the flag again and writes the eventfd, so no batch waits for an unrelated
//!   wake-up.
//!
//! Two lanes per mailbox, each its own bounded queue:
//! * ordered: [`Outboxes::post`] (data: beyond `max_pending` kept messages it fails with
//!   [`RuntimeError::MailboxFull`] and the caller drops, and counts, the message) and
//!   [`Outboxes::post_reliable`] (never refused: a message whose loss would break the receiver
//!   but that must stay behind the data posted before it, such as a fence);
//! * urgent: [`Outboxes::post_urgent`] (never refused, handed to the receiver before anything
//!   of the ordered lane: control messages that must not wait behind a flood of data, such as
//!   replicated changes; no order with the ordered lane).
//!
//! Full mailbox: the sending shard keeps the batch in its [`Outboxes`] and retries next turn;
//! later posts append behind it, so per-sender order holds within each lane. Messages kept
//! beyond `max_pending` in a never-refusing post are reported (for the stats), so a backlog
//! shows instead of growing unseen.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_queue::ArrayQueue;

use crate::error::RuntimeError;
use crate::ids::ShardId;
use crate::sys::eventfd::EventFd;

/// The coalescing wake-up of one shard.
#[derive(Debug)]
pub(crate) struct Waker {
    eventfd: EventFd,
    pending: AtomicBool,
}

impl Waker {
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            eventfd: EventFd::new()?,
            pending: AtomicBool::new(false),
        })
    }

    /// Wakes the owning shard unless a wake-up is already pending.
    pub(crate) fn wake(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            // A failed eventfd write would only be EBADF on a closed runtime; the flag stays set
            // and the shard's next turn drains the queue anyway.
            let _ = self.eventfd.notify();
        }
    }

    /// Receiver side: the eventfd fired; allow the next wake-up. Call before draining.
    pub(crate) fn rearm(&self) {
        self.pending.swap(false, Ordering::AcqRel);
    }

    /// The eventfd the shard waits on.
    pub(crate) fn eventfd(&self) -> &EventFd {
        &self.eventfd
    }
}

/// Which of a mailbox's queues a message travels in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Handed over first each turn; no order with the other lane.
    Urgent,
    /// In the order posted.
    Ordered,
}

impl Lane {
    pub(crate) const ALL: [Lane; 2] = [Lane::Urgent, Lane::Ordered];

    fn index(self) -> usize {
        match self {
            Lane::Urgent => 0,
            Lane::Ordered => 1,
        }
    }
}

/// One shard's inbox: a bounded queue of batches per lane and one wake-up.
pub(crate) struct Mailbox<M> {
    lanes: [ArrayQueue<Vec<M>>; 2],
    waker: std::sync::Arc<Waker>,
}

impl<M> Mailbox<M> {
    /// A mailbox holding at most `batches` batches in each lane.
    pub(crate) fn new(batches: usize) -> io::Result<Self> {
        Ok(Self {
            lanes: [ArrayQueue::new(batches), ArrayQueue::new(batches)],
            waker: std::sync::Arc::new(Waker::new()?),
        })
    }

    /// Offers a batch to `lane`; gives it back when that lane is full. Wakes the receiver on
    /// success.
    pub(crate) fn push_to(&self, lane: Lane, batch: Vec<M>) -> Result<(), Vec<M>> {
        self.lanes[lane.index()].push(batch)?;
        self.waker.wake();
        Ok(())
    }

    /// Offers a batch to the ordered lane (see [`Self::push_to`]).
    pub(crate) fn push(&self, batch: Vec<M>) -> Result<(), Vec<M>> {
        self.push_to(Lane::Ordered, batch)
    }

    /// Whether both lanes are empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.lanes.iter().all(ArrayQueue::is_empty)
    }

    /// Takes the oldest batch of `lane`.
    pub(crate) fn pop_from(&self, lane: Lane) -> Option<Vec<M>> {
        self.lanes[lane.index()].pop()
    }

    /// Takes the oldest batch of the ordered lane.
    #[cfg(test)]
    pub(crate) fn pop(&self) -> Option<Vec<M>> {
        self.pop_from(Lane::Ordered)
    }

    pub(crate) fn waker(&self) -> &Waker {
        &self.waker
    }

    /// The waker, shared (the input-fence board wakes shards through it).
    pub(crate) fn shared_waker(&self) -> std::sync::Arc<Waker> {
        std::sync::Arc::clone(&self.waker)
    }
}

/// A sending shard's per-destination batches of one lane for the current turn (plus any batch
/// a full mailbox refused earlier).
struct LaneOutbox<M> {
    batches: Vec<Vec<M>>,
}

impl<M> LaneOutbox<M> {
    fn batch(&mut self, shard: ShardId) -> Result<&mut Vec<M>, RuntimeError> {
        let count = self.batches.len();
        self.batches
            .get_mut(shard.index())
            .ok_or(RuntimeError::NoSuchShard { shard, count })
    }

    /// Pushes every non-empty batch into its mailbox's `lane`; the batch for `own` goes to
    /// `local`. Returns whether a full mailbox refused a batch (kept for the next turn).
    fn flush(
        &mut self,
        mailboxes: &[Mailbox<M>],
        lane: Lane,
        own: ShardId,
        local: &mut Vec<M>,
    ) -> bool {
        let mut blocked = false;
        for (index, batch) in self.batches.iter_mut().enumerate() {
            if batch.is_empty() {
                continue;
            }
            if index == own.index() {
                local.append(batch);
                continue;
            }
            if let Err(refused) = mailboxes[index].push_to(lane, std::mem::take(batch)) {
                *batch = refused;
                blocked = true;
            }
        }
        blocked
    }
}

/// A sending shard's outgoing batches, one [`LaneOutbox`] per lane.
pub(crate) struct Outboxes<M> {
    lanes: [LaneOutbox<M>; 2],
    max_pending: usize,
    blocked: bool,
}

impl<M> Outboxes<M> {
    pub(crate) fn new(shards: usize, max_pending: usize) -> Self {
        let lane = || LaneOutbox {
            batches: (0..shards).map(|_| Vec::new()).collect(),
        };
        Self {
            lanes: [lane(), lane()],
            max_pending,
            blocked: false,
        }
    }

    /// Queues `message` for `shard`'s next ordered batch; refused beyond `max_pending`.
    pub(crate) fn post(&mut self, shard: ShardId, message: M) -> Result<(), RuntimeError> {
        let batch = self.lanes[Lane::Ordered.index()].batch(shard)?;
        if batch.len() >= self.max_pending {
            return Err(RuntimeError::MailboxFull {
                shard,
                pending: batch.len(),
            });
        }
        batch.push(message);
        Ok(())
    }

    /// Queues `message` for `shard`'s next ordered batch, behind everything posted there
    /// before. Never refused for a full mailbox: returns whether it was kept beyond the bound.
    pub(crate) fn post_reliable(
        &mut self,
        shard: ShardId,
        message: M,
    ) -> Result<bool, RuntimeError> {
        self.post_unrefused(Lane::Ordered, shard, message)
    }

    /// Queues `message` for `shard`'s next urgent batch. Never refused for a full mailbox:
    /// returns whether it was kept beyond the bound.
    pub(crate) fn post_urgent(&mut self, shard: ShardId, message: M) -> Result<bool, RuntimeError> {
        self.post_unrefused(Lane::Urgent, shard, message)
    }

    fn post_unrefused(
        &mut self,
        lane: Lane,
        shard: ShardId,
        message: M,
    ) -> Result<bool, RuntimeError> {
        let batch = self.lanes[lane.index()].batch(shard)?;
        batch.push(message);
        Ok(batch.len() > self.max_pending)
    }

    /// Messages waiting for `shard`, both lanes.
    pub(crate) fn pending(&self, shard: ShardId) -> usize {
        let lane = |lane: &LaneOutbox<M>| lane.batches.get(shard.index()).map_or(0, Vec::len);
        self.lanes.iter().map(lane).sum()
    }

    /// Pushes every non-empty batch into its mailbox, urgent lane first (one wake-up per
    /// destination at most). The batches for `own` go to `local` instead (urgent ones to
    /// `local.urgent`): a shard delivers to itself without the queue. A refused batch stays
    /// here for the next turn (see [`Outboxes::is_blocked`]).
    pub(crate) fn flush(
        &mut self,
        mailboxes: &[Mailbox<M>],
        own: ShardId,
        local: &mut LocalInbox<M>,
    ) {
        self.blocked = false;
        for lane in Lane::ALL {
            let local = match lane {
                Lane::Urgent => &mut local.urgent,
                Lane::Ordered => &mut local.ordered,
            };
            self.blocked |= self.lanes[lane.index()].flush(mailboxes, lane, own, local);
        }
    }

    /// Whether any message waits to leave.
    pub(crate) fn has_pending(&self) -> bool {
        let lane_pending = |lane: &LaneOutbox<M>| lane.batches.iter().any(|b| !b.is_empty());
        self.lanes.iter().any(lane_pending)
    }

    /// Shrinks every per-destination batch to what it holds (after a burst).
    pub(crate) fn shrink_batches(&mut self) {
        for lane in &mut self.lanes {
            lane.batches.iter_mut().for_each(Vec::shrink_to_fit);
        }
    }

    /// Whether the last flush kept a batch because a mailbox was full.
    pub(crate) fn is_blocked(&self) -> bool {
        self.blocked
    }
}

/// What a shard posted to itself, per lane.
pub(crate) struct LocalInbox<M> {
    pub(crate) urgent: Vec<M>,
    pub(crate) ordered: Vec<M>,
}

impl<M> LocalInbox<M> {
    /// Shrinks both lanes to what they hold (after a burst).
    pub(crate) fn shrink(&mut self) {
        self.urgent.shrink_to_fit();
        self.ordered.shrink_to_fit();
    }
}

impl<M> Default for LocalInbox<M> {
    fn default() -> Self {
        Self {
            urgent: Vec::new(),
            ordered: Vec::new(),
        }
    }
}

impl<M> LocalInbox<M> {
    pub(crate) fn is_empty(&self) -> bool {
        self.urgent.is_empty() && self.ordered.is_empty()
    }
}

#[cfg(test)]
#[path = "mailbox_tests.rs"]
mod tests;
