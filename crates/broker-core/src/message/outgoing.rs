//! One copy of a message for one session, kept at 32 bytes: copies fill the inflight windows,
//! the queues and the batches between shards (one per recipient), so their size is memory
//! traffic on every delivery. What most copies lack (a second subscription identifier, a
//! shared group) is boxed apart. A [`BareCopy`] is a copy without its handle on the message:
//! what a batch between shards carries beside the message it holds once (`batch.rs`).

use std::sync::Arc;

use codec::{QoS, SubscriptionId};
use router::SharedFilter;
use smallvec::SmallVec;

use super::published::{CopyView, Message};

/// Subscription identifiers of one delivery (most deliveries carry none or one).
type SubIds = SmallVec<[SubscriptionId; 2]>;

/// One copy of a message for one session.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The message.
    pub message: Arc<Message>,
    /// Its place in the session's stored queue (`[persistence]`), 0 when it is not stored.
    pub seq: u64,
    /// Subscription identifiers and shared group when the copy has more than one identifier
    /// or a group; `None` otherwise.
    rare: Option<Box<Rare>>,
    /// The one subscription identifier of a copy without `rare`, if it has one.
    sub_id: Option<SubscriptionId>,
    /// The QoS to deliver with (the lower of publish and subscription QoS).
    pub qos: QoS,
    /// The RETAIN flag to send.
    pub retain: bool,
}

/// An [`Outgoing`] without its message: the same fields but the handle, so a batch of copies
/// of one message holds one handle on it, not one per copy.
#[derive(Debug)]
pub struct BareCopy {
    /// See [`Outgoing::seq`].
    pub seq: u64,
    rare: Option<Box<Rare>>,
    sub_id: Option<SubscriptionId>,
    /// See [`Outgoing::qos`].
    pub qos: QoS,
    /// See [`Outgoing::retain`].
    pub retain: bool,
}

/// What few copies carry.
#[derive(Debug, Clone)]
struct Rare {
    sub_ids: SubIds,
    shared: Option<SharedFilter>,
}

/// The identifiers of a copy with `rare` and `sub_id`.
fn sub_ids_of<'a>(
    rare: &'a Option<Box<Rare>>,
    sub_id: &'a Option<SubscriptionId>,
) -> &'a [SubscriptionId] {
    match rare {
        Some(rare) => &rare.sub_ids,
        None => sub_id.as_slice(),
    }
}

impl BareCopy {
    /// A copy to deliver with `qos` and `retain`, for the subscriptions with identifiers
    /// `sub_ids`, picked from the shared group `shared` if any; not stored.
    pub fn new(
        qos: QoS,
        retain: bool,
        sub_ids: &[SubscriptionId],
        shared: Option<SharedFilter>,
    ) -> Self {
        let (rare, sub_id) = match (sub_ids, shared) {
            ([], None) => (None, None),
            ([id], None) => (None, Some(*id)),
            (ids, shared) => {
                let sub_ids = ids.iter().copied().collect();
                (Some(Box::new(Rare { sub_ids, shared })), None)
            }
        };
        Self {
            seq: 0,
            rare,
            sub_id,
            qos,
            retain,
        }
    }

    /// The copy of `message` this describes.
    pub fn attach(self, message: Arc<Message>) -> Outgoing {
        let Self {
            seq,
            rare,
            sub_id,
            qos,
            retain,
        } = self;
        Outgoing {
            message,
            seq,
            rare,
            sub_id,
            qos,
            retain,
        }
    }

    /// The borrowed view framing needs, for a copy of `message`.
    pub fn view<'a>(&'a self, message: &'a Arc<Message>) -> CopyView<'a> {
        CopyView {
            message,
            qos: self.qos,
            retain: self.retain,
            sub_ids: sub_ids_of(&self.rare, &self.sub_id),
        }
    }
}

impl Outgoing {
    /// A copy of `message` to deliver with `qos` and `retain`, for the subscriptions with
    /// identifiers `sub_ids`, picked from the shared group `shared` if any; not stored.
    pub fn new(
        message: Arc<Message>,
        qos: QoS,
        retain: bool,
        sub_ids: &[SubscriptionId],
        shared: Option<SharedFilter>,
    ) -> Self {
        BareCopy::new(qos, retain, sub_ids, shared).attach(message)
    }

    /// The copy apart from its handle on the message.
    pub fn detach(self) -> (Arc<Message>, BareCopy) {
        let Self {
            message,
            seq,
            rare,
            sub_id,
            qos,
            retain,
        } = self;
        let bare = BareCopy {
            seq,
            rare,
            sub_id,
            qos,
            retain,
        };
        (message, bare)
    }

    /// The same copy at place `seq` of the session's stored queue.
    pub fn with_seq(mut self, seq: u64) -> Self {
        self.seq = seq;
        self
    }

    /// Subscription identifiers of the matching subscriptions.
    pub fn sub_ids(&self) -> &[SubscriptionId] {
        sub_ids_of(&self.rare, &self.sub_id)
    }

    /// The shared group it was picked from, if any (to redistribute it if the member leaves).
    pub fn shared(&self) -> Option<&SharedFilter> {
        self.rare.as_ref()?.shared.as_ref()
    }

    /// The borrowed view framing needs.
    pub fn view(&self) -> CopyView<'_> {
        CopyView {
            message: &self.message,
            qos: self.qos,
            retain: self.retain,
            sub_ids: self.sub_ids(),
        }
    }
}

impl session_store::Weighed for Outgoing {
    /// A queued copy counts the topic and payload of its message (shared between the sessions
    /// it was queued for, and counted for each).
    fn weight(&self) -> u64 {
        let publish = &self.message.publish;
        (publish.topic().len() + publish.payload().len()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_is_32_bytes_and_24_without_its_message() {
        assert_eq!(std::mem::size_of::<Outgoing>(), 32);
        assert_eq!(std::mem::size_of::<BareCopy>(), 24);
    }

    fn id(n: u32) -> SubscriptionId {
        SubscriptionId::new(n).expect("non-zero")
    }

    fn message() -> Arc<Message> {
        crate::message::published::test_message("t")
    }

    #[test]
    fn identifiers_and_group_read_back_as_given() {
        let group = SharedFilter::new("$share/g/t", &router::TopicLimits::default())
            .expect("valid shared filter");
        let cases: [(&[SubscriptionId], Option<SharedFilter>); 5] = [
            (&[], None),
            (&[id(7)], None),
            (&[id(7), id(9)], None),
            (&[], Some(group.clone())),
            (&[id(3)], Some(group.clone())),
        ];
        for (ids, shared) in cases {
            let copy = Outgoing::new(message(), QoS::AtLeastOnce, false, ids, shared.clone());
            assert_eq!(copy.sub_ids(), ids);
            assert_eq!(copy.view().sub_ids, ids);
            assert_eq!(copy.shared(), shared.as_ref());
            assert_eq!(copy.clone().shared(), shared.as_ref());
            let (held, bare) = copy.with_seq(5).detach();
            assert_eq!(bare.view(&held).sub_ids, ids);
            let again = bare.attach(held);
            assert_eq!((again.seq, again.shared()), (5, shared.as_ref()));
        }
    }
}
