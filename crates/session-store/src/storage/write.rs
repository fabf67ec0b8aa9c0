//! What a durable engine stores: the write events of a session's life and the state they add up
//! to. Owned and engine-neutral (codec types over `Bytes`, std times): an engine serialises
//! them however it likes, and none of its types appear here.

use std::time::SystemTime;

use bytes::Bytes;
use codec::{MqttStr, PacketId, ProtocolVersion, QoS, SubscriptionId, SubscriptionOptions};

use crate::{InflightState, PendingWill, SessionExpiry};

/// A message's place in its session's queue: a per-session sequence number, increasing in
/// queue order (a new one above every message the session has queued at the time; once its
/// queue is empty any will do, though a counter that never goes back is simplest).
pub type MessageSeq = u64;

/// The [`StoredMessage::key`]s of the copies each session's store holds (those without one
/// left out): what a node of a cluster back with its store leaves out of its catch-up read.
pub type StoredKeys = std::collections::HashMap<MqttStr, std::collections::HashSet<u64>>;

/// One message copy as stored for one session (the broker's `Outgoing` without its `Arc`s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// The topic name.
    pub topic: Bytes,
    /// The payload.
    pub payload: Bytes,
    /// The QoS it is delivered with (1 or 2: QoS 0 is never stored).
    pub qos: QoS,
    /// The RETAIN flag it is delivered with.
    pub retain: bool,
    /// The 5.0 properties forwarded unchanged, as encoded (empty for none).
    pub properties: Bytes,
    /// When its Message Expiry Interval runs out, if it has one (wall clock: it must mean the
    /// same after a restart).
    pub expires_at: Option<SystemTime>,
    /// The identifiers of the subscriptions it matched.
    pub sub_ids: Vec<SubscriptionId>,
    /// For a retained message published on this node: when the node accepted it (wall clock).
    /// A node of a cluster compares it with the bucket's record after a restart, to write back
    /// what the bucket lacks (docs/cluster.md, "Retained messages"). `None` for everything
    /// else, for a retained message taken from the cluster's bucket, and for one stored by an
    /// earlier version.
    pub accepted_at: Option<SystemTime>,
    /// Its identity across a cluster (the broker's message key, docs/cluster.md, "Exactly once
    /// across a node's death"): a node that reads the replay stream for a session it got back
    /// from its store skips what the session holds already by it. 0 for none (a single node,
    /// and a copy stored by an earlier version).
    pub key: u64,
}

/// One durable event of a session, keyed by client identifier. A batch is committed as a whole.
///
/// Its messages, will and owner are boxed: a turn's writes are moved into its batch and again
/// into the group commit, so a small write (88 bytes; 280 with them inline) moves less.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionWrite {
    /// A persistent session was created, or its connection-scoped state changed (a resumed
    /// session's new expiry, will or protocol, or the identity that now holds it). Creates the
    /// session if it is not stored.
    SessionSaved {
        client_id: MqttStr,
        protocol: ProtocolVersion,
        expiry: SessionExpiry,
        will: Option<Box<PendingWill>>,
        owner: Box<StoredOwner>,
    },
    /// Its connection closed; the expiry interval counts from `at`.
    SessionDisconnected { client_id: MqttStr, at: SystemTime },
    /// The session ended (expired, discarded by Clean Start, or its connection closed with
    /// expiry 0): everything stored for it goes.
    SessionRemoved { client_id: MqttStr },
    /// A subscription was added or replaced.
    Subscribed {
        client_id: MqttStr,
        filter: MqttStr,
        options: SubscriptionOptions,
        id: Option<SubscriptionId>,
    },
    /// A subscription was removed.
    Unsubscribed { client_id: MqttStr, filter: MqttStr },
    /// A QoS 1/2 copy entered the session's queue.
    MessageQueued {
        client_id: MqttStr,
        seq: MessageSeq,
        message: Box<StoredMessage>,
    },
    /// A queued copy left the queue without being sent (dropped at a bound, expired, or given
    /// to another shared-subscription member).
    MessageDropped { client_id: MqttStr, seq: MessageSeq },
    /// A queued copy was sent with `packet_id`: it moves from the queue into the inflight
    /// window, awaiting PUBACK (QoS 1) or PUBREC (QoS 2).
    InflightSent {
        client_id: MqttStr,
        seq: MessageSeq,
        packet_id: PacketId,
    },
    /// A QoS 1/2 copy was queued and at once sent with `packet_id`: `MessageQueued` followed
    /// by its `InflightSent`, as one write (the usual case for a connected subscriber with
    /// room in its window; the queued entry is never stored).
    MessageSent {
        client_id: MqttStr,
        seq: MessageSeq,
        packet_id: PacketId,
        message: Box<StoredMessage>,
    },
    /// PUBREC received and PUBREL sent: the message is released, the id awaits PUBCOMP.
    InflightReleased {
        client_id: MqttStr,
        packet_id: PacketId,
    },
    /// PUBACK or PUBCOMP received (or the entry abandoned): the id is free.
    InflightAcked {
        client_id: MqttStr,
        packet_id: PacketId,
    },
    /// An inbound QoS 2 PUBLISH was forwarded; its id awaits PUBREL.
    Qos2Received {
        client_id: MqttStr,
        packet_id: PacketId,
    },
    /// PUBREL received for an inbound QoS 2 id.
    Qos2Released {
        client_id: MqttStr,
        packet_id: PacketId,
    },
    /// A retained message was set or replaced for `topic` (not a session's: no client).
    RetainSet {
        topic: MqttStr,
        message: Box<StoredMessage>,
    },
    /// The retained message of `topic` was cleared (a no-op if there is none).
    RetainCleared { topic: MqttStr },
    /// A delayed message (`$delayed/`) is kept under `id` until it is published (not a
    /// session's: no client). Replaces one stored under the same id.
    DelayedSet {
        id: u64,
        delayed: Box<StoredDelayed>,
    },
    /// The delayed message `id` was published or cancelled (a no-op if there is none).
    DelayedCleared { id: u64 },
}

impl SessionWrite {
    /// The client whose session this write changes; `None` for the retained-message and
    /// delayed-message writes.
    pub fn client_id(&self) -> Option<&MqttStr> {
        match self {
            Self::SessionSaved { client_id, .. }
            | Self::SessionDisconnected { client_id, .. }
            | Self::SessionRemoved { client_id }
            | Self::Subscribed { client_id, .. }
            | Self::Unsubscribed { client_id, .. }
            | Self::MessageQueued { client_id, .. }
            | Self::MessageDropped { client_id, .. }
            | Self::InflightSent { client_id, .. }
            | Self::MessageSent { client_id, .. }
            | Self::InflightReleased { client_id, .. }
            | Self::InflightAcked { client_id, .. }
            | Self::Qos2Received { client_id, .. }
            | Self::Qos2Released { client_id, .. } => Some(client_id),
            Self::RetainSet { .. }
            | Self::RetainCleared { .. }
            | Self::DelayedSet { .. }
            | Self::DelayedCleared { .. } => None,
        }
    }

    /// The variant's name (for errors and logs).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SessionSaved { .. } => "SessionSaved",
            Self::SessionDisconnected { .. } => "SessionDisconnected",
            Self::SessionRemoved { .. } => "SessionRemoved",
            Self::Subscribed { .. } => "Subscribed",
            Self::Unsubscribed { .. } => "Unsubscribed",
            Self::MessageQueued { .. } => "MessageQueued",
            Self::MessageDropped { .. } => "MessageDropped",
            Self::InflightSent { .. } => "InflightSent",
            Self::MessageSent { .. } => "MessageSent",
            Self::InflightReleased { .. } => "InflightReleased",
            Self::InflightAcked { .. } => "InflightAcked",
            Self::Qos2Received { .. } => "Qos2Received",
            Self::Qos2Released { .. } => "Qos2Released",
            Self::RetainSet { .. } => "RetainSet",
            Self::RetainCleared { .. } => "RetainCleared",
            Self::DelayedSet { .. } => "DelayedSet",
            Self::DelayedCleared { .. } => "DelayedCleared",
        }
    }
}

/// A delayed message (`$delayed/{seconds}/{topic}`) as stored until it is published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDelayed {
    /// When it is due (wall clock: it must mean the same after a restart).
    pub due: SystemTime,
    /// The client that published it.
    pub publisher: MqttStr,
    /// The message as it will be published: its topic the target, its expiry on the wall
    /// clock, no subscription identifiers.
    pub message: StoredMessage,
}

/// The identity a stored session belongs to, so that a session read back after a restart is
/// still refused to every other identity (the broker's `auth.client_id_owner_check`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StoredOwner {
    /// Not known: a session stored before owners were recorded (its record has no owner), or
    /// one that was never claimed since.
    #[default]
    Unbound,
    /// A client that connected without a username.
    Anonymous,
    /// The client that connected with this username.
    User(MqttStr),
}

/// A subscription as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSubscription {
    /// The filter text (a `$share/` prefix included).
    pub filter: MqttStr,
    /// Its options.
    pub options: SubscriptionOptions,
    /// Its subscription identifier.
    pub id: Option<SubscriptionId>,
}

/// One session as an engine gives it back after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// The client identifier.
    pub client_id: MqttStr,
    /// The protocol version of its latest connection.
    pub protocol: ProtocolVersion,
    /// Its expiry interval.
    pub expiry: SessionExpiry,
    /// The will of its latest connection, if not yet published.
    pub will: Option<PendingWill>,
    /// The identity it belongs to.
    pub owner: StoredOwner,
    /// When its connection closed, if it had closed.
    pub disconnected_at: Option<SystemTime>,
    /// Its subscriptions, in the order first made.
    pub subscriptions: Vec<StoredSubscription>,
    /// Its queued messages, in queue order.
    pub queued: Vec<(MessageSeq, StoredMessage)>,
    /// Its inflight entries, in send order (resent in that order).
    pub inflight: Vec<(PacketId, InflightState<StoredMessage>)>,
    /// Inbound QoS 2 ids awaiting PUBREL.
    pub awaiting_release: Vec<PacketId>,
}

impl StoredSession {
    /// A session with nothing but its connection-scoped state, its owner not known (set
    /// [`Self::owner`] where it is).
    pub fn new(
        client_id: MqttStr,
        protocol: ProtocolVersion,
        expiry: SessionExpiry,
        will: Option<PendingWill>,
    ) -> Self {
        Self {
            client_id,
            protocol,
            expiry,
            will,
            owner: StoredOwner::Unbound,
            disconnected_at: None,
            subscriptions: Vec::new(),
            queued: Vec::new(),
            inflight: Vec::new(),
            awaiting_release: Vec::new(),
        }
    }
}

/// What [`SessionStorage::load`](super::SessionStorage::load) gives back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Every stored session, by client identifier.
    pub sessions: Vec<StoredSession>,
    /// Every retained message, by topic.
    pub retained: Vec<(MqttStr, StoredMessage)>,
    /// Every pending delayed message, by id.
    pub delayed: Vec<(u64, StoredDelayed)>,
}

/// What [`SessionStorage::load_paged`](super::SessionStorage::load_paged) gives back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PagedRecovered {
    /// Every stored session and retained message, as `load` gives them but for each session's
    /// `queued`: only its first messages (in sequence order).
    pub recovered: Recovered,
    /// Each session's whole queue length, in the order of `recovered.sessions`.
    pub queued_totals: Vec<usize>,
    /// The highest sequence number of any queued message, loaded or not (0 for none): new
    /// ones must be above it.
    pub max_queued_seq: MessageSeq,
}

#[cfg(test)]
mod tests {
    use super::SessionWrite;

    #[test]
    fn a_write_stays_small() {
        // Turns move their writes into a batch and the store thread into its group commit.
        assert!(
            std::mem::size_of::<SessionWrite>() <= 88,
            "{}",
            std::mem::size_of::<SessionWrite>()
        );
    }
}
