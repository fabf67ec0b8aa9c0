//! The bounded queue of one session's messages waiting for the client (offline, or its inflight
//! window full). It is bounded by a message count and a byte count per session and by a byte
//! budget shared by every queue of the broker; what happens at a bound is the configured
//! [`OverflowPolicy`]. An empty queue costs one pointer and holds no charge.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::budget::ByteBudget;

/// What a full queue does with one more message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowPolicy {
    /// Drop the oldest queued messages to make room.
    DropOldest,
    /// Refuse the new message; the caller disconnects the slow client.
    Refuse,
}

/// The bytes a queued message counts against the byte bounds.
pub trait Weighed {
    /// Its size in bytes.
    fn weight(&self) -> u64;
}

/// The bounds every queue of a broker shares, passed to [`MessageQueue::push`] (kept once, not
/// per session).
#[derive(Debug, Clone)]
pub struct QueueLimits {
    /// Most messages in one queue (at least 1).
    pub max_len: usize,
    /// Most bytes in one queue.
    pub max_bytes: u64,
    /// What a full queue does.
    pub policy: OverflowPolicy,
    /// Bytes queued over all queues, against the broker-wide limit.
    pub budget: Arc<ByteBudget>,
}

/// The outcome of [`MessageQueue::push`].
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed<M> {
    /// Queued.
    Queued,
    /// Queued after these oldest messages were dropped to make room (given back, oldest first).
    DroppedOldest(Vec<M>),
    /// Not queued: the queue is full and the policy refuses, or the message cannot fit even in
    /// an empty queue. The message is given back, with the older ones dropped first.
    Refused { message: M, dropped: Vec<M> },
}

/// A FIFO bounded by [`QueueLimits`].
#[derive(Debug)]
pub struct MessageQueue<M: Weighed> {
    filled: Option<Box<Filled<M>>>,
}

/// A queue's messages, their bytes and the budget they are charged to: allocated on first push,
/// freed (and the charge given back) when the queue empties or is dropped.
#[derive(Debug)]
struct Filled<M> {
    items: VecDeque<M>,
    bytes: u64,
    budget: Arc<ByteBudget>,
}

impl<M> Drop for Filled<M> {
    /// Drops the messages first, then gives their bytes back: whoever sees the bytes released
    /// (to hand freed memory back to the OS) sees them after they were freed.
    fn drop(&mut self) {
        self.items.clear();
        self.budget.release(self.bytes);
    }
}

impl<M: Weighed> Default for MessageQueue<M> {
    fn default() -> Self {
        Self { filled: None }
    }
}

impl<M: Weighed> MessageQueue<M> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a message within `limits`, applying the policy when it does not fit.
    pub fn push(&mut self, message: M, limits: &QueueLimits) -> Pushed<M> {
        let weight = message.weight();
        if weight > limits.max_bytes {
            return Pushed::Refused {
                message,
                dropped: Vec::new(),
            };
        }
        let mut dropped = Vec::new();
        loop {
            if self.fits_locally(weight, limits) && limits.budget.try_charge(weight) {
                self.filled_with(&limits.budget).append(message, weight);
                return if dropped.is_empty() {
                    Pushed::Queued
                } else {
                    Pushed::DroppedOldest(dropped)
                };
            }
            if limits.policy == OverflowPolicy::Refuse {
                return Pushed::Refused { message, dropped };
            }
            match self.pop() {
                Some(oldest) => dropped.push(oldest),
                None => return Pushed::Refused { message, dropped },
            }
        }
    }

    fn fits_locally(&self, weight: u64, limits: &QueueLimits) -> bool {
        self.len() < limits.max_len.max(1) && self.bytes() + weight <= limits.max_bytes
    }

    fn filled_with(&mut self, budget: &Arc<ByteBudget>) -> &mut Filled<M> {
        self.filled.get_or_insert_with(|| {
            Box::new(Filled {
                items: VecDeque::new(),
                bytes: 0,
                budget: Arc::clone(budget),
            })
        })
    }

    /// Puts a message back at the front (e.g. one taken out that could not be sent after all).
    /// This may exceed the bounds by the one message that was just taken out.
    pub fn push_front(&mut self, message: M, limits: &QueueLimits) {
        let weight = message.weight();
        limits.budget.charge(weight);
        let filled = self.filled_with(&limits.budget);
        filled.bytes += weight;
        filled.items.push_front(message);
    }

    /// Takes the oldest message; an emptied queue gives its buffer back (an idle session holds
    /// none).
    pub fn pop(&mut self) -> Option<M> {
        let filled = self.filled.as_mut()?;
        let item = filled.items.pop_front()?;
        filled.forget(item.weight());
        self.free_if_empty();
        Some(item)
    }

    /// Messages queued.
    pub fn len(&self) -> usize {
        self.filled.as_ref().map_or(0, |f| f.items.len())
    }

    /// Bytes queued.
    pub fn bytes(&self) -> u64 {
        self.filled.as_ref().map_or(0, |f| f.bytes)
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every message for which `keep` is false (e.g. expired ones); returns how many.
    pub fn retain(&mut self, mut keep: impl FnMut(&M) -> bool) -> usize {
        self.take_where(|m| !keep(m)).len()
    }

    /// Removes and returns, oldest first, the messages for which `take` is true.
    pub fn take_where(&mut self, mut take: impl FnMut(&M) -> bool) -> Vec<M> {
        let Some(filled) = self.filled.as_mut() else {
            return Vec::new();
        };
        let mut taken = Vec::new();
        let mut kept = VecDeque::new();
        for item in std::mem::take(&mut filled.items) {
            if take(&item) {
                filled.forget(item.weight());
                taken.push(item);
            } else {
                kept.push_back(item);
            }
        }
        filled.items = kept;
        self.free_if_empty();
        taken
    }

    /// Iterates over the queued messages, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &M> {
        self.filled.iter().flat_map(|f| f.items.iter())
    }

    fn free_if_empty(&mut self) {
        if self.filled.as_ref().is_some_and(|f| f.items.is_empty()) {
            self.filled = None;
        }
    }
}

impl<M: Weighed> Filled<M> {
    fn append(&mut self, message: M, weight: u64) {
        self.bytes += weight;
        self.items.push_back(message);
    }

    /// Stops counting a message taken out.
    fn forget(&mut self, weight: u64) {
        self.bytes -= weight;
        self.budget.release(weight);
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
