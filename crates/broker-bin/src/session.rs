//! One MQTT session: its subscriptions, inflight and queued messages, QoS 2 state and will.
//! A session lives on exactly one shard at a time; it moves (as a whole) on takeover.

use std::time::Duration;

use codec::{MqttStr, ProtocolVersion, SubscriptionId, SubscriptionOptions, Will};
use ring_runtime::ConnId;
use router::{SubscriberId, SubscriptionFilter};
use session_store::{AwaitingRelease, InflightWindow, MessageQueue};

use crate::config::Config;
use crate::message::Outgoing;
use crate::shard::ArmedTimer;

/// A subscription as the session remembers it (the replicas hold the matching index).
#[derive(Debug, Clone)]
pub struct SessionSubscription {
    /// The parsed filter.
    pub filter: SubscriptionFilter,
    /// Its options.
    pub options: SubscriptionOptions,
    /// Its subscription identifier.
    pub id: Option<SubscriptionId>,
}

/// A session's subscriptions by filter text. Clients hold few subscriptions (bounded by
/// `limits.max_subscriptions_per_client`), so a list costs less memory than a hash map and a
/// scan is cheap; SUBSCRIBE and UNSUBSCRIBE are rare next to PUBLISH. The list is allocated at
/// the first subscription and freed with the last.
#[derive(Debug, Default)]
#[expect(
    clippy::box_collection,
    reason = "boxed, a session without subscriptions holds 8 bytes instead of 24"
)]
pub struct SubscriptionList {
    entries: Option<Box<Vec<(MqttStr, SessionSubscription)>>>,
}

impl SubscriptionList {
    fn entries(&self) -> &[(MqttStr, SessionSubscription)] {
        self.entries.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Whether `filter` is subscribed.
    pub fn contains_key(&self, filter: &MqttStr) -> bool {
        self.entries().iter().any(|(f, _)| f == filter)
    }

    /// Adds or replaces the subscription to `filter`.
    pub fn insert(&mut self, filter: MqttStr, subscription: SessionSubscription) {
        let entries = self.entries.get_or_insert_with(Box::default);
        match entries.iter_mut().find(|(f, _)| *f == filter) {
            Some((_, existing)) => *existing = subscription,
            None => entries.push((filter, subscription)),
        }
    }

    /// Removes the subscription to `filter`.
    pub fn remove(&mut self, filter: &MqttStr) -> Option<SessionSubscription> {
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

    /// Removes and returns every subscription.
    pub fn drain(&mut self) -> Vec<(MqttStr, SessionSubscription)> {
        self.entries.take().map(|e| *e).unwrap_or_default()
    }
}

/// Session Expiry Interval: `Never` for 0xFFFFFFFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionExpiry {
    /// The session ends when the connection closes.
    OnClose,
    /// The session ends this many seconds after the connection closes.
    After(u32),
    /// The session never expires.
    Never,
}

impl SessionExpiry {
    /// From the wire value, capped by the configured maximum (whole seconds).
    pub fn from_interval(seconds: u32, max: Duration) -> Self {
        let max = u32::try_from(max.as_secs()).unwrap_or(u32::MAX);
        match seconds {
            0 => Self::OnClose,
            u32::MAX if max == u32::MAX => Self::Never,
            s => Self::After(s.min(max)),
        }
    }
}

/// A will waiting to be published.
#[derive(Debug, Clone)]
pub struct PendingWill {
    /// The will from CONNECT.
    pub will: Will,
    /// The Will Delay Interval.
    pub delay: Duration,
}

/// The timers of a disconnected session (boxed: connected sessions, the common case, have none).
#[derive(Debug, Default)]
pub struct SessionTimers {
    /// Its expiry timer.
    pub expiry: Option<ArmedTimer>,
    /// Its will-delay timer.
    pub will: Option<ArmedTimer>,
}

/// One session (128 bytes).
#[derive(Debug)]
pub struct Session {
    /// The client identifier.
    pub client_id: MqttStr,
    /// The compact key the subscription tables know this session by.
    pub subscriber: SubscriberId,
    /// The protocol version of its latest connection.
    pub protocol: ProtocolVersion,
    /// Its subscriptions, by filter text.
    pub subscriptions: SubscriptionList,
    /// QoS 1/2 messages sent and not yet acknowledged.
    pub inflight: InflightWindow<Outgoing>,
    /// Messages waiting for the client (offline, window full or connection backlogged).
    pub queue: MessageQueue<Outgoing>,
    /// Inbound QoS 2 packet ids awaiting PUBREL.
    pub awaiting_release: AwaitingRelease,
    /// How long it outlives its connection.
    pub expiry: SessionExpiry,
    /// The will of its current connection, if any (boxed: most sessions have none).
    pub will: Option<Box<PendingWill>>,
    /// Its current connection.
    pub conn: Option<ConnId>,
    /// Its expiry and will-delay timers (armed while disconnected).
    timers: Option<Box<SessionTimers>>,
}

impl Session {
    /// A fresh session.
    pub fn new(client_id: MqttStr, subscriber: SubscriberId, config: &Config) -> Box<Self> {
        Box::new(Self {
            client_id,
            subscriber,
            protocol: ProtocolVersion::V3_1_1,
            subscriptions: SubscriptionList::default(),
            inflight: InflightWindow::new(config.limits.max_inflight_outbound),
            queue: MessageQueue::new(),
            awaiting_release: AwaitingRelease::default(),
            expiry: SessionExpiry::OnClose,
            will: None,
            conn: None,
            timers: None,
        })
    }

    /// Takes both timers (to disarm them).
    pub fn take_timers(&mut self) -> SessionTimers {
        self.timers.take().map(|t| *t).unwrap_or_default()
    }

    /// Records the expiry timer.
    pub fn set_expiry_timer(&mut self, timer: Option<ArmedTimer>) {
        self.timers_mut().expiry = timer;
        self.free_timers_if_none();
    }

    /// Records the will-delay timer.
    pub fn set_will_timer(&mut self, timer: Option<ArmedTimer>) {
        self.timers_mut().will = timer;
        self.free_timers_if_none();
    }

    fn timers_mut(&mut self) -> &mut SessionTimers {
        self.timers.get_or_insert_with(Box::default)
    }

    fn free_timers_if_none(&mut self) {
        if self
            .timers
            .as_ref()
            .is_some_and(|t| t.expiry.is_none() && t.will.is_none())
        {
            self.timers = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_interval_is_capped() {
        let max = Duration::from_secs(100);
        assert_eq!(SessionExpiry::from_interval(0, max), SessionExpiry::OnClose);
        assert_eq!(
            SessionExpiry::from_interval(50, max),
            SessionExpiry::After(50)
        );
        assert_eq!(
            SessionExpiry::from_interval(u32::MAX, max),
            SessionExpiry::After(100)
        );
        let unlimited = Duration::from_secs(u64::from(u32::MAX));
        assert_eq!(
            SessionExpiry::from_interval(u32::MAX, unlimited),
            SessionExpiry::Never
        );
    }

    #[test]
    fn empty_subscription_lists_and_timers_hold_no_allocation() {
        let filter = MqttStr::from_bytes(bytes::Bytes::from_static(b"a/b")).unwrap();
        let mut list = SubscriptionList::default();
        assert!(list.is_empty());
        let subscription = SessionSubscription {
            filter: SubscriptionFilter::from_bytes(
                filter.as_shared_bytes().clone(),
                &router::TopicLimits::default(),
            )
            .unwrap(),
            options: SubscriptionOptions::default(),
            id: None,
        };
        list.insert(filter.clone(), subscription.clone());
        list.insert(filter.clone(), subscription);
        assert_eq!(list.len(), 1);
        assert!(list.remove(&filter).is_some());
        assert!(list.entries.is_none());
        assert!(list.remove(&filter).is_none());
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_session_fits_a_128_byte_allocation() {
        assert!(std::mem::size_of::<Session>() <= 128);
    }
}
