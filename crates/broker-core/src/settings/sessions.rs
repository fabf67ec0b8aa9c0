//! `[sessions]`, `[queues]`, `[retained]` and `[routing]`.

use std::time::Duration;

/// What happens to a QoS 1/2 message when a session's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowConsumerPolicy {
    /// Drop the oldest queued message and count it.
    DropOldest,
    /// Disconnect the slow client with 0x97 Quota Exceeded.
    Disconnect,
}

/// `[routing]`
#[derive(Debug, Clone)]
pub struct RoutingSettings {
    pub shared_strategy: router::SharedStrategy,
    /// `$exclusive/<filter>` subscriptions (`crate::exclusive`) on.
    pub exclusive_subscriptions: bool,
    /// `[[rewrite]]` rules.
    pub rewrite: router::TopicRewrite,
    /// `[[auto_subscribe]]`: what every session is subscribed to when its client connects.
    pub auto_subscribe: Vec<AutoSubscription>,
}

/// One `[[auto_subscribe]]` entry: a filter template (`%c` the client id, `%u` the username)
/// and the subscription's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoSubscription {
    pub filter: String,
    pub options: codec::SubscriptionOptions,
}

impl AutoSubscription {
    /// The filter for `client_id` and `username`; `None` when it names `%u` and there is no
    /// username.
    pub fn filter_for(&self, client_id: &str, username: Option<&str>) -> Option<String> {
        if self.filter.contains("%u") && username.is_none() {
            return None;
        }
        let filter = self.filter.replace("%c", client_id);
        Some(filter.replace("%u", username.unwrap_or_default()))
    }
}

/// `[queues]`
#[derive(Debug, Clone)]
pub struct QueueSettings {
    pub outbound_bytes: u64,
    pub backlog_retry: Duration,
    pub max_queued_messages: u32,
    /// Most bytes queued for one session.
    pub max_queued_bytes: u64,
    /// Most bytes queued over all sessions.
    pub max_total_queued_bytes: u64,
    /// Most bytes waiting in send queues over all connections.
    pub max_total_outbound_bytes: u64,
    pub slow_consumer_policy: SlowConsumerPolicy,
}

/// `[sessions]`
#[derive(Debug, Clone)]
pub struct SessionSettings {
    pub max_session_expiry: Duration,
    pub max_sessions: u32,
}

impl SessionSettings {
    /// The session expiry `connect` asks for, within `sessions.max_session_expiry`.
    pub fn expiry_for(&self, connect: &codec::Connect) -> session_store::SessionExpiry {
        let interval = requested_expiry_interval(connect);
        session_store::SessionExpiry::from_interval(interval, self.max_session_expiry)
    }
}

/// The Session Expiry Interval `connect` asks for: 5.0's property (0 when absent); for 3.x, 0
/// with Clean Session and "never" without.
pub fn requested_expiry_interval(connect: &codec::Connect) -> u32 {
    if connect.protocol.is_v5() {
        connect.properties.session_expiry_interval.unwrap_or(0)
    } else if connect.clean_start {
        0
    } else {
        u32::MAX
    }
}

/// `[retained]`
#[derive(Debug, Clone)]
pub struct RetainedSettings {
    pub max_messages: u32,
    pub max_bytes: u64,
    /// Most retained copies one connection's delivery cursors put on the wire per turn.
    pub delivery_per_turn: u32,
}
