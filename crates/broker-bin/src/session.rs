//! One MQTT session: its subscriptions, inflight and queued messages, QoS 2 state and will.
//! A session lives on exactly one shard at a time; it moves (as a whole) on takeover.

use std::time::Duration;

use codec::{MqttStr, ProtocolVersion, SubscriptionId, SubscriptionOptions, Will};
use ring_runtime::ConnId;
use router::{SubscriberId, SubscriptionFilter};
use session_store::{AwaitingRelease, InflightWindow, MessageQueue, OverflowPolicy};

use crate::config::{Config, SlowConsumerPolicy};
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
/// scan is cheap; SUBSCRIBE and UNSUBSCRIBE are rare next to PUBLISH.
#[derive(Debug, Default)]
pub struct SubscriptionList {
    entries: Vec<(MqttStr, SessionSubscription)>,
}

impl SubscriptionList {
    /// Whether `filter` is subscribed.
    pub fn contains_key(&self, filter: &MqttStr) -> bool {
        self.entries.iter().any(|(f, _)| f == filter)
    }

    /// Adds or replaces the subscription to `filter`.
    pub fn insert(&mut self, filter: MqttStr, subscription: SessionSubscription) {
        match self.entries.iter_mut().find(|(f, _)| *f == filter) {
            Some((_, existing)) => *existing = subscription,
            None => self.entries.push((filter, subscription)),
        }
    }

    /// Removes the subscription to `filter`.
    pub fn remove(&mut self, filter: &MqttStr) -> Option<SessionSubscription> {
        let at = self.entries.iter().position(|(f, _)| f == filter)?;
        Some(self.entries.swap_remove(at).1)
    }

    /// Subscriptions held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes and yields every subscription.
    pub fn drain(&mut self) -> impl Iterator<Item = (MqttStr, SessionSubscription)> + '_ {
        self.entries.drain(..)
    }
}

/// Session Expiry Interval: `Never` for 0xFFFFFFFF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionExpiry {
    /// The session ends when the connection closes.
    OnClose,
    /// The session ends this long after the connection closes.
    After(Duration),
    /// The session never expires.
    Never,
}

impl SessionExpiry {
    /// From the wire value, capped by the configured maximum.
    pub fn from_interval(seconds: u32, max: Duration) -> Self {
        match seconds {
            0 => Self::OnClose,
            u32::MAX if max.as_secs() >= u64::from(u32::MAX) => Self::Never,
            s => Self::After(Duration::from_secs(u64::from(s)).min(max)),
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

/// One session.
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
    /// Its expiry timer (armed while disconnected).
    pub expiry_timer: Option<ArmedTimer>,
    /// Its will-delay timer (armed while disconnected with a delayed will).
    pub will_timer: Option<ArmedTimer>,
}

impl Session {
    /// A fresh session.
    pub fn new(client_id: MqttStr, subscriber: SubscriberId, config: &Config) -> Box<Self> {
        let policy = match config.queues.slow_consumer_policy {
            SlowConsumerPolicy::DropOldest => OverflowPolicy::DropOldest,
            SlowConsumerPolicy::Disconnect => OverflowPolicy::Refuse,
        };
        Box::new(Self {
            client_id,
            subscriber,
            protocol: ProtocolVersion::V3_1_1,
            subscriptions: SubscriptionList::default(),
            inflight: InflightWindow::new(config.limits.max_inflight_outbound),
            queue: MessageQueue::new(config.queues.max_queued_messages as usize, policy),
            awaiting_release: AwaitingRelease::default(),
            expiry: SessionExpiry::OnClose,
            will: None,
            conn: None,
            expiry_timer: None,
            will_timer: None,
        })
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
            SessionExpiry::After(Duration::from_secs(50))
        );
        assert_eq!(
            SessionExpiry::from_interval(u32::MAX, max),
            SessionExpiry::After(max)
        );
        let unlimited = Duration::from_secs(u64::from(u32::MAX));
        assert_eq!(
            SessionExpiry::from_interval(u32::MAX, unlimited),
            SessionExpiry::Never
        );
    }
}
