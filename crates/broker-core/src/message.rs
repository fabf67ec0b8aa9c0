//! What travels between shards: shared messages, their recipients, replicated changes and
//! session hand-overs.

use std::sync::Arc;

use codec::{MqttStr, ProtocolVersion};
use ring_runtime::ShardId;
use router::{Sequenced, SubscriberId, SubscriptionChange, TopicName};

use crate::session::Session;

mod batch;
mod outgoing;
mod published;
use crate::directory::ClaimId;

pub use batch::{BatchedCopy, CopyBatch, Recipient};
pub use outgoing::{BareCopy, Outgoing};
#[cfg(test)]
pub(crate) use published::test_message;
pub use published::{CopyView, Expiry, Message};

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

/// A change as a shard sent it, with where it came from (subscription order across shards,
/// `shard/order_kept.rs`).
#[derive(Debug, Clone)]
pub struct SentChange {
    pub change: Change,
    pub source: ChangeSource,
}

/// The shard that stamped a change and the input stamp of the turn it was made in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangeSource {
    pub shard: ShardId,
    pub input: ring_runtime::InputStamp,
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
    /// Whether the cluster's mirror holds the session (`Some`), with the shard's flag for it
    /// (`Owning::mirrored`): the shard it moves to carries the mirror on.
    pub mirrored: Option<bool>,
}

/// Everything a shard receives in its mailbox.
#[derive(Debug)]
pub enum ShardMsg {
    /// A change in the total order.
    Change(Sequenced<SentChange>),
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
    /// Sent once by the broker at start: start the shard's periodic work.
    Start,
    /// Another shard applied a subscription of a session this shard holds (a SUBACK may be due).
    Applied,
    /// Large amounts of memory were freed: hand this shard's free allocator memory to the OS.
    ReturnMemory,
    /// A question from the admin API.
    Admin(crate::admin_query::AdminQuery),
    /// A message from another node of the cluster, for local subscribers only.
    Cluster(Box<broker_api::cluster::ClusterPublish>),
    /// The cluster's answer to a CONNECT waiting for its client id.
    ClusterOwnership(Box<broker_api::cluster::OwnershipAnswer>),
    /// Another node takes a client over: release its session (forwarded to its shard).
    ClusterRelease(Box<broker_api::cluster::ReleaseRequest>),
    /// A session released to another node is that node's now: its stored copy here goes.
    ClusterReleaseTaken(codec::MqttStr),
}

/// The protocol version of a connection before its CONNECT is known.
pub const PRE_CONNECT_PROTOCOL: ProtocolVersion = ProtocolVersion::V3_1_1;
