//! Exclusive subscriptions (EMQX's `$exclusive/<filter>`, on with
//! `routing.exclusive_subscriptions`): a SUBSCRIBE to `$exclusive/<filter>` subscribes to
//! `<filter>` only if no other session holds it; the next one is refused with 0x97 (Quota
//! exceeded) until the holder unsubscribes or its session ends. The session keeps the
//! subscription under its `$exclusive/` text (an UNSUBSCRIBE names it so; it is stored so),
//! and a restart takes the holds back from the stored sessions. Held per node: in a cluster
//! each node has its own holder. Off, `$exclusive/...` is an ordinary filter (it matches only
//! topics that start with `$exclusive/`).

use bytes::Bytes;
use codec::MqttStr;
use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use router::{SubscriptionFilter, TopicLimits};

/// What marks a subscription filter exclusive.
pub const PREFIX: &str = "$exclusive/";

/// Which session holds each exclusive filter.
#[derive(Debug, Default)]
pub struct ExclusiveSubscriptions {
    enabled: bool,
    held: DashMap<Box<str>, MqttStr, ahash::RandomState>,
}

/// A subscription filter as written, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFilter {
    /// The filter it subscribes to.
    pub filter: SubscriptionFilter,
    /// Whether it is held exclusively (then `filter` is what follows the prefix).
    pub exclusive: bool,
}

impl ExclusiveSubscriptions {
    /// Exclusive subscriptions on (`true`) or off.
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            held: DashMap::default(),
        }
    }

    /// Reads the filter a subscription `text` names (`None`: not a valid filter): with
    /// exclusive subscriptions on, a `$exclusive/` text names the rest, which may not be a
    /// shared subscription.
    pub fn read(&self, text: &MqttStr, limits: &TopicLimits) -> Option<ReadFilter> {
        let bytes: Bytes = text.as_shared_bytes().clone();
        let exclusive = self.enabled && text.as_str().starts_with(PREFIX);
        let bytes = if exclusive {
            bytes.slice(PREFIX.len()..)
        } else {
            bytes
        };
        let filter = SubscriptionFilter::from_bytes(bytes, limits).ok()?;
        if exclusive && matches!(filter, SubscriptionFilter::Shared(_)) {
            return None;
        }
        Some(ReadFilter { filter, exclusive })
    }

    /// Whether exclusive subscriptions are on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Takes `filter` (the text after the prefix) for `client`: whether it holds it now (it
    /// may hold it already).
    pub fn acquire(&self, filter: &str, client: &MqttStr) -> bool {
        match self.held.entry(Box::from(filter)) {
            Entry::Occupied(held) => held.get() == client,
            Entry::Vacant(free) => {
                free.insert(client.clone());
                true
            }
        }
    }

    /// Gives `text`'s filter back, if `text` is exclusive and `client` holds it.
    pub fn release(&self, text: &str, client: &MqttStr) {
        if !self.enabled {
            return;
        }
        if let Some(filter) = text.strip_prefix(PREFIX) {
            self.held.remove_if(filter, |_, holder| holder == client);
        }
    }

    /// The session holding `filter`, if one does.
    pub fn holder(&self, filter: &str) -> Option<MqttStr> {
        self.held.get(filter).map(|holder| holder.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> MqttStr {
        MqttStr::try_from(s.to_owned()).unwrap()
    }

    #[test]
    fn one_session_at_a_time_holds_a_filter() {
        let locks = ExclusiveSubscriptions::new(true);
        let limits = TopicLimits::default();
        let read = locks.read(&text("$exclusive/a/+"), &limits).unwrap();
        assert!(read.exclusive);
        assert!(locks.acquire("a/+", &text("one")));
        assert!(
            locks.acquire("a/+", &text("one")),
            "a holder may subscribe again"
        );
        assert!(!locks.acquire("a/+", &text("two")));
        locks.release("$exclusive/a/+", &text("two"));
        assert_eq!(
            locks.holder("a/+"),
            Some(text("one")),
            "only the holder releases"
        );
        locks.release("$exclusive/a/+", &text("one"));
        assert!(locks.acquire("a/+", &text("two")));
    }

    #[test]
    fn off_or_shared_it_is_no_exclusive_filter() {
        let limits = TopicLimits::default();
        let off = ExclusiveSubscriptions::new(false);
        assert!(!off.read(&text("$exclusive/a"), &limits).unwrap().exclusive);
        let on = ExclusiveSubscriptions::new(true);
        assert!(on.read(&text("$exclusive/$share/g/a"), &limits).is_none());
        assert!(!on.read(&text("a/b"), &limits).unwrap().exclusive);
    }
}
