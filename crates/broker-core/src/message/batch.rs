//! The copies one shard sends another in one turn. Each message is held once per batch, and
//! each copy names it by its place in the batch: the routing shard takes one handle on a
//! message per destination shard, not one per recipient, so a fan-out does not move the
//! message's reference count between cores once per copy. The receiving shard frames a QoS 0
//! copy from the batch's handle and takes a handle of its own only for a copy it keeps (QoS
//! 1/2, a copy held or forwarded), on its own core.

use std::sync::Arc;

use codec::QoS;
use router::SubscriberId;

/// A message for some sessions owned by one shard.
#[derive(Debug)]
pub struct Recipient {
    /// The receiving session.
    pub subscriber: SubscriberId,
    /// Its copy of the message.
    pub outgoing: Outgoing,
}

use super::{BareCopy, Message, Outgoing};

/// See the module documentation.
#[derive(Debug, Default)]
pub struct CopyBatch {
    /// The messages of the copies, each once (consecutive copies of one message share it).
    messages: Vec<Arc<Message>>,
    copies: Vec<BatchedCopy>,
}

/// One copy in a [`CopyBatch`].
#[derive(Debug)]
pub struct BatchedCopy {
    /// The receiving session.
    pub subscriber: SubscriberId,
    /// Its message's place in the batch's messages.
    message: usize,
    /// The copy apart from its message.
    pub copy: BareCopy,
}

impl CopyBatch {
    /// Adds a copy of `message` for `subscriber`, taking a handle on `message` only if the
    /// copy before is of another message.
    pub fn push(&mut self, subscriber: SubscriberId, message: &Arc<Message>, copy: BareCopy) {
        let message = self
            .last_place_of(message)
            .unwrap_or_else(|| self.hold(Arc::clone(message)));
        self.copies.push(BatchedCopy {
            subscriber,
            message,
            copy,
        });
    }

    /// Adds a copy that has its own handle (dropped here if the copy before is of the same
    /// message).
    pub fn push_recipient(&mut self, recipient: Recipient) {
        let (message, copy) = recipient.outgoing.detach();
        let message = self
            .last_place_of(&message)
            .unwrap_or_else(|| self.hold(message));
        self.copies.push(BatchedCopy {
            subscriber: recipient.subscriber,
            message,
            copy,
        });
    }

    /// The place of `message` if it is the last one held.
    fn last_place_of(&self, message: &Arc<Message>) -> Option<usize> {
        let last = self.messages.last()?;
        Arc::ptr_eq(last, message).then(|| self.messages.len() - 1)
    }

    fn hold(&mut self, message: Arc<Message>) -> usize {
        self.messages.push(message);
        self.messages.len() - 1
    }

    /// The number of copies.
    pub fn len(&self) -> usize {
        self.copies.len()
    }

    /// Whether it holds no copy.
    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// Whether any copy is QoS 1 or 2 (its delivery is acknowledged to the publisher).
    pub fn has_reliable(&self) -> bool {
        self.copies.iter().any(|c| c.copy.qos != QoS::AtMostOnce)
    }

    /// Gives the spare room back (after a burst).
    pub fn shrink_to_fit(&mut self) {
        self.messages.shrink_to_fit();
        self.copies.shrink_to_fit();
    }

    /// The messages and the copies that name them (see [`BatchedCopy::message_in`]).
    pub fn into_parts(self) -> (Vec<Arc<Message>>, Vec<BatchedCopy>) {
        (self.messages, self.copies)
    }
}

impl BatchedCopy {
    /// Its message, among the `messages` of the batch it came from.
    pub fn message_in<'a>(&self, messages: &'a [Arc<Message>]) -> &'a Arc<Message> {
        &messages[self.message]
    }

    /// The recipient with its own handle on its message, one of the batch's `messages`.
    pub fn into_recipient(self, messages: &[Arc<Message>]) -> Recipient {
        let message = Arc::clone(self.message_in(messages));
        Recipient {
            subscriber: self.subscriber,
            outgoing: self.copy.attach(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Outgoing;
    use crate::message::published::test_message as message;

    fn bare(qos: QoS) -> BareCopy {
        BareCopy::new(qos, false, &[], None)
    }

    #[test]
    fn consecutive_copies_of_one_message_share_one_handle() {
        let (a, b) = (message("a"), message("b"));
        let mut batch = CopyBatch::default();
        for n in 0..3 {
            batch.push(SubscriberId(n), &a, bare(QoS::AtMostOnce));
        }
        batch.push(SubscriberId(3), &b, bare(QoS::AtMostOnce));
        assert_eq!(Arc::strong_count(&a), 2, "the batch holds `a` once");
        assert_eq!(Arc::strong_count(&b), 2);
        assert_eq!(batch.len(), 4);
        let (messages, copies) = batch.into_parts();
        assert_eq!(messages.len(), 2);
        let topics: Vec<&str> = copies
            .iter()
            .map(|c| c.message_in(&messages).publish.topic().as_str())
            .collect();
        assert_eq!(topics, ["a", "a", "a", "b"]);
    }

    #[test]
    fn a_recipient_pushed_after_its_message_gives_its_handle_back() {
        let a = message("a");
        let mut batch = CopyBatch::default();
        batch.push(SubscriberId(1), &a, bare(QoS::AtLeastOnce));
        let recipient = Recipient {
            subscriber: SubscriberId(2),
            outgoing: Outgoing::new(Arc::clone(&a), QoS::AtLeastOnce, false, &[], None),
        };
        batch.push_recipient(recipient);
        assert_eq!(Arc::strong_count(&a), 2);
        assert!(batch.has_reliable());
        let (messages, copies) = batch.into_parts();
        let kept: Vec<Recipient> = copies
            .into_iter()
            .map(|c| c.into_recipient(&messages))
            .collect();
        drop(messages);
        assert_eq!(
            Arc::strong_count(&a),
            3,
            "each kept copy has its own handle"
        );
        assert_eq!(kept[1].subscriber, SubscriberId(2));
    }

    #[test]
    fn a_batch_of_qos_0_copies_asks_for_no_acknowledgement() {
        let mut batch = CopyBatch::default();
        assert!(batch.is_empty() && !batch.has_reliable());
        batch.push(SubscriberId(1), &message("a"), bare(QoS::AtMostOnce));
        assert!(!batch.has_reliable());
    }
}
