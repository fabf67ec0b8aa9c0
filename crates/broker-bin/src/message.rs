//! What travels between shards: shared messages, their recipients, replicated changes and
//! session hand-overs.

use std::sync::Arc;
use std::time::Instant;

use codec::{MqttStr, ProtocolVersion, QoS, SharedPublish, SubscriptionId};
use ring_runtime::ShardId;
use router::{Sequenced, SubscriberId, SubscriptionChange, TopicName};

use crate::session::Session;

mod batch;
mod outgoing;
use crate::directory::ClaimId;

/// One published message, encoded once and shared (by `Arc`) by every recipient on every shard.
#[derive(Debug)]
pub struct Message {
    /// Topic, payload and the properties forwarded unchanged, encoded once.
    pub publish: SharedPublish,
    /// The QoS it was published with.
    pub qos: QoS,
    /// The RETAIN flag it was published with.
    pub retain: bool,
    /// When its Message Expiry Interval runs out, if it has one.
    pub expires_at: Option<Instant>,
    /// The turn it was received in: the receiving shard's `ShardCtx::now`, in nanoseconds
    /// since the broker started, for the delivery latency; 0 for a message read back from the
    /// store (not measured).
    pub received_ns: u64,
}

/// How long a message still lives, for forwarding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// It has no expiry interval.
    Never,
    /// Whole seconds left (forwarded as the new Message Expiry Interval).
    Remaining(u32),
    /// It has expired: never deliver it.
    Expired,
}

impl Message {
    /// The expiry state at `now`.
    pub fn expiry(&self, now: Instant) -> Expiry {
        match self.expires_at {
            None => Expiry::Never,
            Some(at) if at <= now => Expiry::Expired,
            Some(at) => {
                let secs = at.duration_since(now).as_secs_f64().ceil();
                Expiry::Remaining(u32::try_from(secs as u64).unwrap_or(u32::MAX).max(1))
            }
        }
    }
}

pub use batch::{BatchedCopy, CopyBatch};
pub use outgoing::{BareCopy, Outgoing};

/// A QoS 1 message on `topic` with a one-byte payload, for the copies' unit tests.
#[cfg(test)]
fn test_message(topic: &'static str) -> Arc<Message> {
    let topic = MqttStr::from_static(topic).expect("valid UTF-8");
    let publish =
        SharedPublish::from_parts(topic, bytes::Bytes::from_static(b"p"), bytes::Bytes::new())
            .expect("valid topic");
    Arc::new(Message {
        publish,
        qos: QoS::AtLeastOnce,
        retain: false,
        expires_at: None,
        received_ns: 0,
    })
}

/// One copy of a message as framing sees it: borrowed, so a QoS 0 copy delivered on the shard
/// that routed it needs no [`Outgoing`] of its own.
#[derive(Debug, Clone, Copy)]
pub struct CopyView<'a> {
    /// The message.
    pub message: &'a Arc<Message>,
    /// The QoS to deliver with.
    pub qos: QoS,
    /// The RETAIN flag to send.
    pub retain: bool,
    /// Subscription identifiers of the matching subscriptions.
    pub sub_ids: &'a [SubscriptionId],
}

/// A message for some sessions owned by one shard.
#[derive(Debug)]
pub struct Recipient {
    /// The receiving session.
    pub subscriber: SubscriberId,
    /// Its copy of the message.
    pub outgoing: Outgoing,
}

/// A change every shard applies in the same total order.
#[derive(Debug, Clone)]
pub enum Change {
    /// A subscription was added or removed.
    Subscription(SubscriptionChange),
    /// A session (by its subscriber id) lives on `shard` from now on.
    Owner {
        subscriber: SubscriberId,
        shard: ShardId,
    },
    /// A session ended: forget its owner.
    Gone { subscriber: SubscriberId },
    /// A retained message was set (`Some`) or cleared (`None`).
    Retain {
        topic: TopicName,
        message: Option<Arc<Message>>,
    },
}

/// A shard asks the shard holding a session to hand it over.
#[derive(Debug)]
pub struct TakeoverRequest {
    /// The session's client identifier.
    pub client_id: MqttStr,
    /// The shard where the new connection waits.
    pub to_shard: ShardId,
    /// The new connection's claim (on `to_shard`).
    pub to_claim: ClaimId,
    /// The claim it supersedes (on the shard the request goes to).
    pub supersedes: ClaimId,
    /// Whether the new connection discards the session (Clean Start).
    pub clean_start: bool,
}

/// The answer to a [`TakeoverRequest`].
#[derive(Debug)]
pub struct SessionTransfer {
    /// The session's client identifier.
    pub client_id: MqttStr,
    /// The waiting claim.
    pub to_claim: ClaimId,
    /// The session, unless it was discarded (Clean Start) or had ended.
    pub session: Option<Box<Session>>,
}

/// Everything a shard receives in its mailbox.
#[derive(Debug)]
pub enum ShardMsg {
    /// A change in the total order.
    Change(Sequenced<Change>),
    /// Messages for sessions this shard owns (or owned: it forwards them), routed by `origin`
    /// (`forwarded`: passed on by the shard a session left).
    Deliver {
        origin: ShardId,
        forwarded: bool,
        copies: CopyBatch,
        /// The origin's store ticket to confirm once the copies are durable here, when its
        /// acknowledgements wait for them (`store/mod.rs`).
        confirm: Option<u64>,
    },
    /// A session moved: everything `origin` routed to its old shard is ahead of this marker
    /// (see `shard/fence.rs`).
    Fence {
        subscriber: SubscriberId,
        origin: ShardId,
        forwarded: bool,
    },
    /// Hand a session over to another shard.
    Takeover(TakeoverRequest),
    /// A session handed over.
    Transfer(SessionTransfer),
    /// Sent once by [`crate::Broker::start`]: start the shard's periodic work.
    Start,
    /// Another shard applied a subscription of a session this shard holds (a SUBACK may be due).
    Applied,
    /// Large amounts of memory were freed: hand this shard's free allocator memory to the OS.
    ReturnMemory,
    /// A question from the admin API.
    Admin(crate::admin::query::AdminQuery),
    /// A message from another node of the cluster, for local subscribers only.
    Cluster(Box<crate::cluster::ClusterPublish>),
    /// The cluster's answer to a CONNECT waiting for its client id.
    ClusterOwnership(Box<crate::cluster::OwnershipAnswer>),
    /// Another node takes a client over: release its session (forwarded to its shard).
    ClusterRelease(Box<crate::cluster::ReleaseRequest>),
}

/// The protocol version of a connection before its CONNECT is known.
pub const PRE_CONNECT_PROTOCOL: ProtocolVersion = ProtocolVersion::V3_1_1;
