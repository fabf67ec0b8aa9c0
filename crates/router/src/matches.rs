//! The reusable output buffer of a match: one delivery per subscriber (plus one per shared
//! group), with the merged options of overlapping subscriptions.

use codec::{QoS, SubscriptionId};

use crate::filter::SharedFilter;
use crate::index::WalkStack;
use crate::subscription::{SubscriberId, Subscription};

/// One message copy to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery<'a> {
    /// Who receives it.
    pub subscriber: SubscriberId,
    /// The highest QoS granted by the subscriber's matching subscriptions. The broker sends at
    /// the lower of this and the PUBLISH's QoS.
    pub qos: QoS,
    /// Whether any matching subscription has retain-as-published set (OR over overlapping
    /// subscriptions: if one of them asks to keep the RETAIN flag, it is kept).
    pub retain_as_published: bool,
    /// The subscription identifiers of all matching subscriptions, ascending, without repeats.
    pub subscription_ids: &'a [SubscriptionId],
    /// For a shared-subscription delivery, the group it was picked from (the broker needs it
    /// to redistribute unacknowledged messages when the member leaves).
    pub shared: Option<&'a SharedFilter>,
}

#[derive(Debug, Clone)]
struct DeliverySlot {
    subscriber: SubscriberId,
    qos: QoS,
    retain_as_published: bool,
    ids_start: u32,
    ids_end: u32,
    shared: Option<SharedFilter>,
}

/// The result of one match, reused across matches: after warm-up a match allocates nothing.
///
/// Order: non-shared deliveries first, one per subscriber, then one delivery per matching shared
/// group (a subscriber can appear in both: MQTT 5.0 4.8.2 allows that second copy). The order is
/// a deterministic function of the table's contents.
#[derive(Debug, Clone, Default)]
pub struct Matches {
    pub(crate) hits: Vec<Subscription>,
    pub(crate) stack: WalkStack,
    slots: Vec<DeliverySlot>,
    ids: Vec<SubscriptionId>,
}

impl Matches {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of deliveries.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether nobody receives the message.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The deliveries.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Delivery<'_>> + '_ {
        self.slots.iter().map(|slot| self.view(slot))
    }

    /// The `index`th delivery.
    pub fn get(&self, index: usize) -> Option<Delivery<'_>> {
        self.slots.get(index).map(|slot| self.view(slot))
    }

    fn view<'a>(&'a self, slot: &'a DeliverySlot) -> Delivery<'a> {
        Delivery {
            subscriber: slot.subscriber,
            qos: slot.qos,
            retain_as_published: slot.retain_as_published,
            subscription_ids: &self.ids[slot.ids_start as usize..slot.ids_end as usize],
            shared: slot.shared.as_ref(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.hits.clear();
        self.slots.clear();
        self.ids.clear();
    }

    fn ids_len(&self) -> u32 {
        u32::try_from(self.ids.len()).expect("invariant: fewer than 2^32 identifiers per match")
    }

    /// Turns the collected non-shared hits into deliveries. `may_repeat` is false when the hits
    /// came from a single filter, where every subscriber appears at most once.
    pub(crate) fn merge_hits(&mut self, may_repeat: bool) {
        let mut hits = std::mem::take(&mut self.hits);
        if may_repeat {
            hits.sort_unstable_by_key(|h| (h.subscriber, h.id));
        }
        let mut run_start = 0;
        while run_start < hits.len() {
            let subscriber = hits[run_start].subscriber;
            let run_len = hits[run_start..]
                .iter()
                .take_while(|h| h.subscriber == subscriber)
                .count();
            self.push_run(&hits[run_start..run_start + run_len]);
            run_start += run_len;
        }
        hits.clear();
        self.hits = hits;
    }

    /// One delivery for a run of hits of the same subscriber, sorted by identifier.
    fn push_run(&mut self, run: &[Subscription]) {
        let ids_start = self.ids_len();
        let mut qos = QoS::AtMostOnce;
        let mut retain_as_published = false;
        for hit in run {
            qos = qos.max(hit.options.qos);
            retain_as_published |= hit.options.retain_as_published;
            if let Some(id) = hit.id
                && self.ids[ids_start as usize..].last() != Some(&id)
            {
                self.ids.push(id);
            }
        }
        let ids_end = self.ids_len();
        self.slots.push(DeliverySlot {
            subscriber: run[0].subscriber,
            qos,
            retain_as_published,
            ids_start,
            ids_end,
            shared: None,
        });
    }

    /// One delivery to the member picked from a shared group.
    pub(crate) fn push_shared(&mut self, member: &Subscription, group: &SharedFilter) {
        let ids_start = self.ids_len();
        self.ids.extend(member.id);
        let ids_end = self.ids_len();
        self.slots.push(DeliverySlot {
            subscriber: member.subscriber,
            qos: member.options.qos,
            retain_as_published: member.options.retain_as_published,
            ids_start,
            ids_end,
            shared: Some(group.clone()),
        });
    }
}
