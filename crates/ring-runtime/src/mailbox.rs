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
//! Full mailbox: the sending shard keeps the batch in its [`Outboxes`] and retries next turn;
//! later posts append behind it, so per-sender order holds. Two lanes share that one ordered
//! batch:
//! * data ([`Outboxes::post`]): beyond `max_pending` kept messages it fails with
//!   [`RuntimeError::MailboxFull`] and the caller drops (and counts) the message;
//! * control ([`Outboxes::post_control`]): never refused, because losing one would break an
//!   invariant of the receiver (a replicated change that leaves a gap stops replication for
//!   good). Control messages kept beyond `max_pending` are counted, so a backlog shows in the
//!   stats instead of growing unseen.

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

/// One shard's inbox.
pub(crate) struct Mailbox<M> {
    queue: ArrayQueue<Vec<M>>,
    waker: Waker,
}

impl<M> Mailbox<M> {
    /// A mailbox holding at most `batches` batches.
    pub(crate) fn new(batches: usize) -> io::Result<Self> {
        Ok(Self {
            queue: ArrayQueue::new(batches),
            waker: Waker::new()?,
        })
    }

    /// Offers a batch; gives it back when the mailbox is full. Wakes the receiver on success.
    pub(crate) fn push(&self, batch: Vec<M>) -> Result<(), Vec<M>> {
        self.queue.push(batch)?;
        self.waker.wake();
        Ok(())
    }

    /// Takes the oldest batch.
    pub(crate) fn pop(&self) -> Option<Vec<M>> {
        self.queue.pop()
    }

    pub(crate) fn waker(&self) -> &Waker {
        &self.waker
    }
}

/// A sending shard's per-destination batches for the current turn (plus any batch a full
/// mailbox refused earlier).
pub(crate) struct Outboxes<M> {
    batches: Vec<Vec<M>>,
    max_pending: usize,
    blocked: bool,
}

impl<M> Outboxes<M> {
    pub(crate) fn new(shards: usize, max_pending: usize) -> Self {
        Self {
            batches: (0..shards).map(|_| Vec::new()).collect(),
            max_pending,
            blocked: false,
        }
    }

    /// Queues `message` for `shard`'s next batch.
    pub(crate) fn post(&mut self, shard: ShardId, message: M) -> Result<(), RuntimeError> {
        let count = self.batches.len();
        let batch = self
            .batches
            .get_mut(shard.index())
            .ok_or(RuntimeError::NoSuchShard { shard, count })?;
        if batch.len() >= self.max_pending {
            return Err(RuntimeError::MailboxFull {
                shard,
                pending: batch.len(),
            });
        }
        batch.push(message);
        Ok(())
    }

    /// Queues a control `message` for `shard`'s next batch, behind everything posted to it
    /// before. Never refused for a full mailbox: returns whether it was kept beyond the bound
    /// (for the stats).
    pub(crate) fn post_control(
        &mut self,
        shard: ShardId,
        message: M,
    ) -> Result<bool, RuntimeError> {
        let count = self.batches.len();
        let batch = self
            .batches
            .get_mut(shard.index())
            .ok_or(RuntimeError::NoSuchShard { shard, count })?;
        batch.push(message);
        Ok(batch.len() > self.max_pending)
    }

    /// Messages waiting for `shard`.
    pub(crate) fn pending(&self, shard: ShardId) -> usize {
        self.batches.get(shard.index()).map_or(0, Vec::len)
    }

    /// Pushes every non-empty batch into its mailbox (one wake-up per destination at most).
    /// The batch for `own` goes to `local` instead: a shard delivers to itself without the
    /// queue. A refused batch stays here for the next turn (see [`Outboxes::is_blocked`]).
    pub(crate) fn flush(&mut self, mailboxes: &[Mailbox<M>], own: ShardId, local: &mut Vec<M>) {
        self.blocked = false;
        for (index, batch) in self.batches.iter_mut().enumerate() {
            if batch.is_empty() {
                continue;
            }
            if index == own.index() {
                local.append(batch);
                continue;
            }
            if let Err(refused) = mailboxes[index].push(std::mem::take(batch)) {
                *batch = refused;
                self.blocked = true;
            }
        }
    }

    /// Whether any message waits to leave.
    pub(crate) fn has_pending(&self) -> bool {
        self.batches.iter().any(|batch| !batch.is_empty())
    }

    /// Whether the last flush kept a batch because a mailbox was full.
    pub(crate) fn is_blocked(&self) -> bool {
        self.blocked
    }
}

#[cfg(test)]
#[path = "mailbox_tests.rs"]
mod tests;
