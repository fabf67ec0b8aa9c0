//! [`AckGate`]: the SUBACKs and UNSUBACKs this shard holds until every shard has applied the
//! subscription changes they acknowledge (and, with `[persistence]` acknowledgements waiting
//! for the disk, until the store batch holding their subscription writes is durable), each
//! SUBACK with the retained messages due to its new subscriptions ([`RetainedDue`], sent right
//! after it); and the shards to wake with `ShardMsg::Applied` once this shard has applied
//! changes for their sessions. `subscribe.rs` hands acknowledgements in, `gate.rs` holds and
//! releases them (`ack_when_applied`, `release_acks`), `changes.rs` fills `to_nudge`.

use super::FastSet;
use codec::{MqttStr, Packet, QoS, SubscriptionId};
use ring_runtime::ConnId;
use ring_runtime::ShardId;
use router::{ChangeSeq, SubscriptionFilter};

/// Retained messages owed to new subscriptions once their SUBACK is out.
pub(super) type RetainedDue = Vec<RetainedOwed>;

/// The retained delivery owed to one new subscription.
#[derive(Debug)]
pub(super) struct RetainedOwed {
    /// The filter's text as the session keys the subscription (the delivery ends once the
    /// session no longer holds it).
    pub(super) key: MqttStr,
    pub(super) filter: SubscriptionFilter,
    pub(super) granted: QoS,
    pub(super) id: Option<SubscriptionId>,
}

/// Acknowledgements waiting for replication, and the shards to wake once this shard has
/// applied changes for their sessions.
#[derive(Debug, Default)]
pub(super) struct AckGate {
    pub(super) pending: Vec<PendingAck>,
    pub(super) to_nudge: FastSet<ShardId>,
}

/// An acknowledgement waiting for its changes to be applied on every shard.
#[derive(Debug)]
pub(super) struct PendingAck {
    pub(super) conn: ConnId,
    /// The last change it acknowledges (`None`: none to wait for).
    pub(super) after: Option<ChangeSeq>,
    /// The store ticket whose batch holds its subscription writes, when it must be durable
    /// first (`[persistence]` with acknowledgements waiting for the disk).
    pub(super) ticket: Option<u64>,
    /// The acknowledgement (`None` for subscriptions no client asked for: `[[auto_subscribe]]`).
    pub(super) packet: Option<Packet>,
    pub(super) retained_due: RetainedDue,
}
