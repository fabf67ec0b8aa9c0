//! What the admin API asks a shard, and what the shard answers. Every answer is bounded by the
//! request's `limit` (pages follow a cursor: the last key of the previous page).

use bytes::Bytes;
use codec::{QoS, ReasonCode};
use crossbeam_channel::Sender;

/// A question for one shard; the answer goes back on `reply`.
#[derive(Debug)]
pub enum AdminQuery {
    /// This shard's sessions with a client id after `after`, at most `limit`, by client id.
    Clients {
        after: Option<String>,
        limit: usize,
        /// Only the sessions whose client id or address contains this text.
        search: Option<String>,
        reply: Sender<Vec<ClientInfo>>,
    },
    /// One session, with its subscriptions.
    Client {
        client_id: String,
        reply: Sender<Option<ClientDetail>>,
    },
    /// Disconnect the client with `reason` (5.0: DISCONNECT with it); whether it was
    /// connected here.
    Disconnect {
        client_id: String,
        reason: ReasonCode,
        reply: Sender<bool>,
    },
    /// Subscriptions of this shard's sessions after the cursor (client id, filter), at most
    /// `limit`.
    Subscriptions {
        after: Option<(String, String)>,
        limit: usize,
        reply: Sender<Vec<SubscriptionInfo>>,
    },
    /// Retained messages with a topic after `after`, at most `limit`, by topic.
    Retained {
        after: Option<String>,
        limit: usize,
        reply: Sender<Vec<RetainedInfo>>,
    },
    /// This shard's pending delayed messages with an id after `after`, at most `limit`, by id.
    Delayed {
        after: Option<u64>,
        limit: usize,
        reply: Sender<Vec<DelayedInfo>>,
    },
    /// This shard's slow-subscriber rankings now (`crate::slow`).
    SlowSubscribers {
        reply: Sender<crate::slow::SlowReport>,
    },
    /// Cancel pending delayed message `id`; whether this shard held it.
    CancelDelayed { id: u64, reply: Sender<bool> },
    /// Publish a message as the broker; an error names what is wrong with it.
    Publish {
        topic: String,
        payload: Bytes,
        qos: QoS,
        retain: bool,
        reply: Sender<Result<(), String>>,
    },
}

/// One client in a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    pub client_id: String,
    /// The identity its session belongs to (the session directory's owner: the CONNECT
    /// username after authentication, or the certificate name a listener takes as one);
    /// `None` for a client without one.
    pub username: Option<String>,
    pub connected: bool,
    /// `ip:port` of its connection, when connected.
    pub address: Option<String>,
    /// `3.1`, `3.1.1` or `5.0`.
    pub protocol: &'static str,
    /// Seconds, as agreed at CONNECT (when connected).
    pub keep_alive: Option<u16>,
    pub subscriptions: usize,
    pub inflight: usize,
    /// Copies waiting to be sent: the whole queue, in memory and, for a stored session, on
    /// disk (beyond `persistence.memory_queue_messages`).
    pub queued: u64,
    /// The part of `queued` kept on disk only.
    pub queued_on_disk: u64,
    /// Unix time (seconds) its current connection was accepted, when connected.
    pub connected_since: Option<u64>,
    pub shard: usize,
}

/// One client, in detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientDetail {
    pub info: ClientInfo,
    /// Session expiry interval in seconds; `None`: never expires.
    pub session_expiry: Option<u64>,
    pub subscription_list: Vec<SubscriptionInfo>,
}

/// One subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionInfo {
    pub client_id: String,
    pub filter: String,
    pub qos: u8,
    pub no_local: bool,
    pub retain_as_published: bool,
    pub retain_handling: u8,
    pub subscription_id: Option<u32>,
}

/// One retained message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetainedInfo {
    pub topic: String,
    pub qos: u8,
    pub payload_bytes: usize,
}

/// One pending delayed message (`$delayed/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayedInfo {
    pub id: u64,
    /// Where it will be published.
    pub topic: String,
    pub qos: u8,
    pub retain: bool,
    /// When it is due, in Unix milliseconds.
    pub due_unix_ms: u64,
    pub payload_bytes: usize,
    /// The client that published it.
    pub publisher: String,
}
