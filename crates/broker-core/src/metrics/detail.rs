//! The figures of one shard that the operations HTTP listener's `/metrics` breaks down by a
//! label (QoS, drop reason, listener kind, shard): written by their shard only, like
//! [`super::ShardCounters`].

use std::sync::atomic::AtomicU64;

use codec::QoS;

use super::histogram::Histogram;

/// Why a message copy was dropped: `messages_dropped` split by cause (the reasons add up to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// A QoS 0 copy for a connection whose send queue is over `queues.outbound_bytes`.
    SlowConsumer,
    /// A QoS 1/2 copy at a full session queue (messages, bytes or the broker-wide budget),
    /// or behind a session move over `queues.max_queued_messages`.
    QueueFull,
    /// Its Message Expiry Interval ran out before it was sent.
    Expired,
    /// Larger than the client's Maximum Packet Size.
    Oversize,
    /// An in-flight copy the ACL no longer lets its client read.
    NotAuthorized,
    /// Another shard's mailbox was over `runtime.max_pending_posts`.
    MailboxFull,
    /// No connection to deliver to: a QoS 0 copy for a disconnected session, or a session
    /// (or shared group member) that no longer exists.
    Offline,
    /// A retained PUBLISH over the `[retained]` bounds (delivered, not retained).
    RetainedFull,
    /// Queued or in-flight copies of a session that ended.
    SessionEnded,
    /// A delayed PUBLISH (`$delayed/`) over `delayed.max_messages` whose client is told
    /// nothing (3.1.1, or QoS 0).
    DelayedFull,
}

impl DropReason {
    /// Every reason, in declaration order.
    pub const ALL: [Self; 10] = [
        Self::SlowConsumer,
        Self::QueueFull,
        Self::Expired,
        Self::Oversize,
        Self::NotAuthorized,
        Self::MailboxFull,
        Self::Offline,
        Self::RetainedFull,
        Self::SessionEnded,
        Self::DelayedFull,
    ];

    /// Its index in [`Self::ALL`] (declaration order).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The `reason` label value.
    pub fn label(self) -> &'static str {
        match self {
            Self::SlowConsumer => "slow_consumer",
            Self::QueueFull => "queue_full",
            Self::Expired => "expired",
            Self::Oversize => "oversize",
            Self::NotAuthorized => "not_authorized",
            Self::MailboxFull => "mailbox_full",
            Self::Offline => "offline",
            Self::RetainedFull => "retained_full",
            Self::SessionEnded => "session_ended",
            Self::DelayedFull => "delayed_full",
        }
    }
}

/// Which kind of listener accepted a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// Plain TCP.
    Tcp,
    /// TLS.
    Tls,
    /// WebSocket.
    Ws,
    /// WebSocket over TLS.
    Wss,
    /// MQTT over QUIC (a stream of a QUIC connection: a virtual connection of the runtime).
    Quic,
}

impl Listener {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 5] = [Self::Tcp, Self::Tls, Self::Ws, Self::Wss, Self::Quic];

    /// Its index in [`Self::ALL`] (declaration order).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The `listener` label value (also the name `Broker::local_addrs_of` takes).
    pub fn label(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Tls => "tls",
            Self::Ws => "ws",
            Self::Wss => "wss",
            Self::Quic => "quic",
        }
    }
}

impl From<transport::TransportKind> for Listener {
    fn from(kind: transport::TransportKind) -> Self {
        use transport::TransportKind;
        match kind {
            TransportKind::Plain => Self::Tcp,
            TransportKind::Tls => Self::Tls,
            TransportKind::Ws => Self::Ws,
            TransportKind::Wss => Self::Wss,
        }
    }
}

/// One counter per QoS level, indexed by `QoS as usize`.
pub type PerQos = [AtomicU64; 3];

/// The index of `qos` in a [`PerQos`].
#[inline]
pub fn qos_index(qos: QoS) -> usize {
    match qos {
        QoS::AtMostOnce => 0,
        QoS::AtLeastOnce => 1,
        QoS::ExactlyOnce => 2,
    }
}

/// One shard's labelled figures.
#[derive(Debug, Default)]
pub struct ShardDetail {
    /// PUBLISH packets received from clients, by their QoS.
    pub received: PerQos,
    /// Payload bytes of those PUBLISH packets, by their QoS.
    pub received_payload_bytes: PerQos,
    /// PUBLISH packets sent to clients, by the QoS they were sent with.
    pub sent: PerQos,
    /// Payload bytes of those PUBLISH packets, by QoS.
    pub sent_payload_bytes: PerQos,
    /// Dropped copies, indexed like [`DropReason::ALL`].
    pub dropped: [AtomicU64; DropReason::ALL.len()],
    /// Connections refused before login, indexed like [`super::Refusal::ALL`].
    pub refused: [AtomicU64; super::Refusal::ALL.len()],
    /// Connections open now on this shard, indexed like [`Listener::ALL`] (gauges).
    pub connections: [AtomicU64; Listener::ALL.len()],
    /// Loop turns of this shard so far (from the runtime's `ShardStats`, copied every turn).
    pub turns: AtomicU64,
    /// Nanoseconds this shard spent working rather than waiting (copied every turn).
    pub busy_ns: AtomicU64,
    /// QoS 1/2 copies in flight to this shard's clients (gauge, refreshed on the gauge tick).
    pub inflight: AtomicU64,
    /// Copies queued in memory for this shard's sessions (gauge, refreshed on the gauge tick).
    pub queued: AtomicU64,
    /// In-broker delivery latency of the copies this shard wrote: from the turn their PUBLISH
    /// arrived (on any shard) to the turn the copy was queued on its subscriber's connection.
    pub delivery_latency: Histogram,
    /// This shard's slow-subscriber rankings as of its last gauge tick (`crate::slow`).
    pub slow: std::sync::Mutex<crate::slow::SlowReport>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_the_lists() {
        for (i, reason) in DropReason::ALL.iter().enumerate() {
            assert_eq!(reason.index(), i);
        }
        for (i, kind) in Listener::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i);
        }
    }
}
