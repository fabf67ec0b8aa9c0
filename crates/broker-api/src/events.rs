//! Broker events for hooks that report them elsewhere (the `webhooks` crate): what happened,
//! as owned values, handed over without waiting. A shard asks [`EventHook::wants`] before it
//! builds an event, so a hook that wants nothing (or none configured) costs one check.

use std::net::SocketAddr;

use bytes::Bytes;

/// The kinds of [`BrokerEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    ClientConnected,
    ClientDisconnected,
    SessionSubscribed,
    SessionUnsubscribed,
    MessagePublished,
    MessageDropped,
}

impl EventKind {
    /// Every kind.
    pub const ALL: [EventKind; 6] = [
        Self::ClientConnected,
        Self::ClientDisconnected,
        Self::SessionSubscribed,
        Self::SessionUnsubscribed,
        Self::MessagePublished,
        Self::MessageDropped,
    ];

    /// The name in configuration and in the events' JSON (`client.connected`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::ClientConnected => "client.connected",
            Self::ClientDisconnected => "client.disconnected",
            Self::SessionSubscribed => "session.subscribed",
            Self::SessionUnsubscribed => "session.unsubscribed",
            Self::MessagePublished => "message.published",
            Self::MessageDropped => "message.dropped",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

/// Something that happened in the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerEvent {
    /// A CONNECT was accepted.
    ClientConnected {
        client_id: String,
        username: Option<String>,
        peer: Option<SocketAddr>,
        /// 3 (3.1), 4 (3.1.1) or 5.
        protocol: u8,
        clean_start: bool,
        keep_alive: u16,
    },
    /// A connected client's connection closed.
    ClientDisconnected { client_id: String, reason: String },
    /// A session subscribed (or replaced a subscription).
    SessionSubscribed {
        client_id: String,
        filter: String,
        qos: u8,
    },
    /// A session unsubscribed from a filter it had.
    SessionUnsubscribed { client_id: String, filter: String },
    /// A client's PUBLISH was accepted (it passed the access checks).
    MessagePublished {
        client_id: String,
        topic: String,
        qos: u8,
        retain: bool,
        payload: Bytes,
    },
    /// Copies of messages were dropped for `reason` (`$SYS/broker/messages/dropped`'s
    /// names): how many.
    MessageDropped { reason: &'static str, count: u64 },
}

impl BrokerEvent {
    /// Its kind.
    pub fn kind(&self) -> EventKind {
        match self {
            Self::ClientConnected { .. } => EventKind::ClientConnected,
            Self::ClientDisconnected { .. } => EventKind::ClientDisconnected,
            Self::SessionSubscribed { .. } => EventKind::SessionSubscribed,
            Self::SessionUnsubscribed { .. } => EventKind::SessionUnsubscribed,
            Self::MessagePublished { .. } => EventKind::MessagePublished,
            Self::MessageDropped { .. } => EventKind::MessageDropped,
        }
    }
}

/// Where the shards hand events: never blocks, never fails (what it cannot take it counts).
pub trait EventHook: Send + Sync {
    /// Whether events of `kind` are wanted at all (asked before one is built).
    fn wants(&self, kind: EventKind) -> bool;

    /// Whether a `message.published` event for the topic name `topic` (valid, as bytes) is
    /// wanted.
    fn wants_topic(&self, topic: &[u8]) -> bool;

    /// Takes `event`.
    fn post(&self, event: BrokerEvent);

    /// What became of the events, per target (for `/metrics`).
    fn figures(&self) -> Vec<EventHookFigures>;
}

/// What became of one target's events (a webhook's, named by its URL).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventHookFigures {
    /// The target (a URL, credentials redacted).
    pub target: String,
    /// Delivered (in a POST that got a 2xx answer).
    pub delivered: u64,
    /// Dropped at once: the target's queue was full.
    pub overflowed: u64,
    /// Given up after every attempt failed.
    pub given_up: u64,
    /// Requests that failed (retried or not).
    pub failed_requests: u64,
}
