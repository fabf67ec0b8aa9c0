//! Subscribers, their subscriptions, and the set of subscriptions stored under one filter.

use std::collections::HashMap;

use ahash::RandomState;
use codec::{SubscriptionId, SubscriptionOptions};
use smallvec::SmallVec;

use crate::trie::NodeValue;

/// An opaque key for a subscribing session, allocated by the broker: 64 bits, so the broker
/// never needs to hand one out twice (a reused key would receive another session's messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SubscriberId(pub u64);

/// One subscription of one subscriber to one filter (16 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscription {
    /// Who subscribed.
    pub subscriber: SubscriberId,
    /// The options from the SUBSCRIBE.
    pub options: SubscriptionOptions,
    /// The subscription identifier from the SUBSCRIBE (5.0), if any.
    pub id: Option<SubscriptionId>,
}

/// Whether a subscribe created a subscription or replaced one (MQTT 3.8.4; retain handling 1
/// sends retained messages only for a new one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscribeOutcome {
    /// The subscriber had no subscription to this filter.
    New,
    /// The subscriber's existing subscription to this filter was replaced.
    Replaced {
        /// The subscription that was replaced.
        previous: Subscription,
    },
}

impl SubscribeOutcome {
    /// Whether the subscription did not exist before.
    pub fn is_new(&self) -> bool {
        matches!(self, Self::New)
    }
}

/// Above this many subscribers, a set keeps a subscriber-to-position index so that subscribe
/// and unsubscribe stay O(1) on hot filters. A tuning constant, not a limit.
const INDEXED_SET_MIN: usize = 16;

/// The subscriptions stored under one filter, at most one per subscriber. Order is insertion
/// order until a removal (removal swaps the last entry into the hole).
#[derive(Debug, Clone, Default)]
pub(crate) struct SubscriberSet {
    entries: SmallVec<[Subscription; 1]>,
    #[expect(
        clippy::box_collection,
        reason = "boxed, the index costs 8 bytes in every set; unboxed, 48 even when unused"
    )]
    positions: Option<Box<HashMap<SubscriberId, u32, RandomState>>>,
}

impl NodeValue for SubscriberSet {
    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl SubscriberSet {
    fn position(&self, subscriber: SubscriberId) -> Option<usize> {
        match &self.positions {
            Some(index) => index.get(&subscriber).map(|&p| p as usize),
            None => self.entries.iter().position(|s| s.subscriber == subscriber),
        }
    }

    fn index_position(&mut self, subscriber: SubscriberId, position: usize) {
        if let Some(index) = &mut self.positions {
            let position = u32::try_from(position).expect("invariant: fewer than 2^32 entries");
            index.insert(subscriber, position);
        }
    }

    /// Adds or replaces the subscription of `subscription.subscriber`.
    pub(crate) fn insert(&mut self, subscription: Subscription) -> SubscribeOutcome {
        if let Some(position) = self.position(subscription.subscriber) {
            let previous = std::mem::replace(&mut self.entries[position], subscription);
            return SubscribeOutcome::Replaced { previous };
        }
        self.entries.push(subscription);
        if self.positions.is_none() && self.entries.len() > INDEXED_SET_MIN {
            let index = self
                .entries
                .iter()
                .enumerate()
                .map(|(p, s)| (s.subscriber, p as u32))
                .collect();
            self.positions = Some(Box::new(index));
        } else {
            self.index_position(subscription.subscriber, self.entries.len() - 1);
        }
        SubscribeOutcome::New
    }

    /// Removes the subscription of `subscriber`, returning it.
    pub(crate) fn remove(&mut self, subscriber: SubscriberId) -> Option<Subscription> {
        let position = self.position(subscriber)?;
        let removed = self.entries.swap_remove(position);
        if let Some(index) = &mut self.positions {
            index.remove(&subscriber);
        }
        if let Some(moved) = self.entries.get(position).map(|s| s.subscriber) {
            self.index_position(moved, position);
        }
        if self.entries.is_empty() {
            *self = Self::default();
        }
        Some(removed)
    }

    /// The subscription of `subscriber`, if any.
    pub(crate) fn get(&self, subscriber: SubscriberId) -> Option<&Subscription> {
        self.position(subscriber).map(|p| &self.entries[p])
    }

    /// All subscriptions in this set.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[Subscription] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(n: u32) -> Subscription {
        Subscription {
            subscriber: SubscriberId(u64::from(n)),
            options: SubscriptionOptions::default(),
            id: SubscriptionId::new(n + 1),
        }
    }

    #[test]
    fn insert_replace_remove_small_and_indexed() {
        for count in [3_u32, 100] {
            let mut set = SubscriberSet::default();
            for n in 0..count {
                assert!(set.insert(sub(n)).is_new());
            }
            let again = set.insert(sub(1));
            assert_eq!(again, SubscribeOutcome::Replaced { previous: sub(1) });
            assert_eq!(set.as_slice().len(), count as usize);
            for n in (0..count).filter(|n| n % 2 == 0) {
                assert_eq!(set.remove(SubscriberId(u64::from(n))), Some(sub(n)));
                assert_eq!(set.remove(SubscriberId(u64::from(n))), None);
            }
            for n in 0..count {
                assert_eq!(
                    set.get(SubscriberId(u64::from(n))).is_some(),
                    n % 2 == 1,
                    "{n} of {count}"
                );
            }
        }
    }

    #[test]
    fn subscription_is_sixteen_bytes() {
        // 8 of them the subscriber key: 64 bits so that keys never wrap and are never reused.
        assert_eq!(size_of::<Subscription>(), 16);
        assert_eq!(size_of::<SubscriberSet>(), 32);
    }
}
