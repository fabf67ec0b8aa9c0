//! The bounded queue of one session's messages waiting for the client (offline, or its inflight
//! window full). What happens at the bound is the configured [`OverflowPolicy`].

use std::collections::VecDeque;

use crate::lazy::LazyDeque;

/// What a full queue does with one more message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverflowPolicy {
    /// Drop the oldest queued message to make room.
    DropOldest,
    /// Refuse the new message; the caller disconnects the slow client.
    Refuse,
}

/// The outcome of [`MessageQueue::push`].
#[derive(Debug, PartialEq, Eq)]
pub enum Pushed<M> {
    /// Queued.
    Queued,
    /// Queued after the oldest message was dropped; here it is, for counting.
    DroppedOldest(M),
    /// Not queued: the queue is full and the policy refuses. The message is given back.
    Refused(M),
}

/// A FIFO bounded by a message count.
#[derive(Debug)]
pub struct MessageQueue<M> {
    items: LazyDeque<M>,
    max_len: u32,
    policy: OverflowPolicy,
}

impl<M> MessageQueue<M> {
    /// An empty queue holding at most `max_len` (at least 1) messages.
    pub fn new(max_len: usize, policy: OverflowPolicy) -> Self {
        Self {
            items: LazyDeque::default(),
            max_len: u32::try_from(max_len.max(1)).unwrap_or(u32::MAX),
            policy,
        }
    }

    /// Appends a message, applying the policy when the queue is full.
    pub fn push(&mut self, message: M) -> Pushed<M> {
        if self.items.len() < self.max_len as usize {
            self.items.push_back(message);
            return Pushed::Queued;
        }
        match self.policy {
            OverflowPolicy::Refuse => Pushed::Refused(message),
            OverflowPolicy::DropOldest => {
                let dropped = self.items.pop_front();
                self.items.push_back(message);
                match dropped {
                    Some(old) => Pushed::DroppedOldest(old),
                    None => Pushed::Queued,
                }
            }
        }
    }

    /// Puts a message back at the front (e.g. one taken out that could not be sent after all).
    /// This may exceed the bound by the one message that was just taken out.
    pub fn push_front(&mut self, message: M) {
        self.items.push_front(message);
    }

    /// Takes the oldest message; an emptied queue gives its buffer back (an idle session holds
    /// none).
    pub fn pop(&mut self) -> Option<M> {
        self.items.pop_front()
    }

    /// Messages queued.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Drops every message for which `keep` is false (e.g. expired ones); returns how many.
    pub fn retain(&mut self, keep: impl FnMut(&M) -> bool) -> usize {
        let before = self.items.len();
        self.items.retain(keep);
        before - self.items.len()
    }

    /// Removes and returns, oldest first, the messages for which `take` is true.
    pub fn take_where(&mut self, mut take: impl FnMut(&M) -> bool) -> Vec<M> {
        let mut taken = Vec::new();
        let mut kept = VecDeque::new();
        for item in self.items.take_all() {
            if take(&item) {
                taken.push(item);
            } else {
                kept.push_back(item);
            }
        }
        self.items.restore(kept);
        taken
    }

    /// Iterates over the queued messages, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &M> {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_oldest_keeps_the_newest() {
        let mut q = MessageQueue::new(2, OverflowPolicy::DropOldest);
        assert_eq!(q.push(1), Pushed::Queued);
        assert_eq!(q.push(2), Pushed::Queued);
        assert_eq!(q.push(3), Pushed::DroppedOldest(1));
        assert_eq!(q.iter().copied().collect::<Vec<_>>(), vec![2, 3]);
    }

    #[test]
    fn refuse_gives_the_message_back() {
        let mut q = MessageQueue::new(1, OverflowPolicy::Refuse);
        assert_eq!(q.push("a"), Pushed::Queued);
        assert_eq!(q.push("b"), Pushed::Refused("b"));
        assert_eq!(q.pop(), Some("a"));
        assert!(q.is_empty());
    }

    #[test]
    fn take_where_keeps_order_of_both_parts() {
        let mut q = MessageQueue::new(10, OverflowPolicy::Refuse);
        for i in 0..6 {
            q.push(i);
        }
        assert_eq!(q.take_where(|m| m % 3 == 0), vec![0, 3]);
        assert_eq!(q.iter().copied().collect::<Vec<_>>(), vec![1, 2, 4, 5]);
    }

    #[test]
    fn retain_counts_removed() {
        let mut q = MessageQueue::new(10, OverflowPolicy::Refuse);
        for i in 0..6 {
            q.push(i);
        }
        assert_eq!(q.retain(|m| m % 2 == 0), 3);
        assert_eq!(q.len(), 3);
    }
}
