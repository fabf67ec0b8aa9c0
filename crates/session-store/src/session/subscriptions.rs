//! A session's own record of its subscriptions (the router's replicas hold the matching index).

use codec::{MqttStr, SubscriptionId, SubscriptionOptions};

/// A subscription as the session remembers it. `F` is the parsed filter of the broker's router
/// (session-store does not depend on the router).
#[derive(Debug, Clone)]
pub struct SessionSubscription<F> {
    /// The parsed filter.
    pub filter: F,
    /// Its options.
    pub options: SubscriptionOptions,
    /// Its subscription identifier.
    pub id: Option<SubscriptionId>,
}

/// One subscription under its filter text.
type Entry<F> = (MqttStr, SessionSubscription<F>);

/// A session's subscriptions by filter text. Clients hold few subscriptions (bounded by
/// `limits.max_subscriptions_per_client`), so a list costs less memory than a hash map and a
/// scan is cheap; SUBSCRIBE and UNSUBSCRIBE are rare next to PUBLISH. The list is allocated at
/// the first subscription and freed with the last.
#[derive(Debug)]
#[expect(
    clippy::box_collection,
    reason = "boxed, a session without subscriptions holds 8 bytes instead of 24"
)]
pub struct SubscriptionList<F> {
    entries: Option<Box<Vec<Entry<F>>>>,
}

impl<F> Default for SubscriptionList<F> {
    fn default() -> Self {
        Self { entries: None }
    }
}

impl<F> SubscriptionList<F> {
    fn entries(&self) -> &[Entry<F>] {
        self.entries.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Whether `filter` is subscribed.
    pub fn contains_key(&self, filter: &MqttStr) -> bool {
        self.entries().iter().any(|(f, _)| f == filter)
    }

    /// Adds or replaces the subscription to `filter`. The first one allocates room for one
    /// entry only (`Vec` would reserve four): most sessions hold a single subscription.
    pub fn insert(&mut self, filter: MqttStr, subscription: SessionSubscription<F>) {
        let entries = self
            .entries
            .get_or_insert_with(|| Box::new(Vec::with_capacity(1)));
        match entries.iter_mut().find(|(f, _)| *f == filter) {
            Some((_, existing)) => *existing = subscription,
            None => entries.push((filter, subscription)),
        }
    }

    /// Removes the subscription to `filter`.
    pub fn remove(&mut self, filter: &MqttStr) -> Option<SessionSubscription<F>> {
        let entries = self.entries.as_mut()?;
        let at = entries.iter().position(|(f, _)| f == filter)?;
        let removed = entries.swap_remove(at).1;
        if entries.is_empty() {
            self.entries = None;
        }
        Some(removed)
    }

    /// Subscriptions held.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_none()
    }

    /// Every subscription, in the order first made.
    pub fn iter(&self) -> impl Iterator<Item = (&MqttStr, &SessionSubscription<F>)> {
        self.entries().iter().map(|(filter, s)| (filter, s))
    }

    /// Removes and returns every subscription.
    pub fn drain(&mut self) -> Vec<Entry<F>> {
        self.entries.take().map(|e| *e).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_subscription_lists_hold_no_allocation() {
        let filter = MqttStr::from_bytes(bytes::Bytes::from_static(b"a/b")).unwrap();
        let mut list = SubscriptionList::default();
        assert!(list.is_empty());
        let subscription = SessionSubscription {
            filter: "a/b",
            options: SubscriptionOptions::default(),
            id: None,
        };
        list.insert(filter.clone(), subscription.clone());
        list.insert(filter.clone(), subscription);
        assert_eq!(list.len(), 1);
        assert_eq!(list.entries.as_ref().unwrap().capacity(), 1);
        assert!(list.contains_key(&filter));
        assert!(list.remove(&filter).is_some());
        assert!(list.entries.is_none());
        assert!(list.remove(&filter).is_none());
    }
}
