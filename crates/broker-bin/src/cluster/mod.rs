//! The cluster link (`[cluster]`, docs/cluster.md): RingMQ nodes exchange messages over NATS.
//!
//! One thread per node runs a NATS client on a small single-threaded tokio runtime
//! ([`link`]); no reactor ever touches the network for it. The shards talk to it through
//! [`ClusterLink`]:
//! - outbound: every PUBLISH accepted from a local client (not one that came from NATS) is
//!   one `try_send` of its shared [`Message`] into a bounded queue; a full queue drops it,
//!   counted;
//! - interest: shard 0 reports each subscription its replica adds or removes (in the total
//!   order of the replicated table); the link counts references per filter and holds one
//!   NATS subscription per subject while the count is above zero ([`interest`]);
//! - inbound: messages NATS delivers are posted to a shard (chosen by the topic, so one
//!   topic's messages keep their order) as [`ShardMsg::Cluster`], which routes them to local
//!   subscribers only.

mod buckets;
mod claiming;
mod counters;
mod headers;
mod inbound;
mod interest;
mod lifecycle;
mod link;
mod mirror;
mod outbound;
mod ownership;
mod reliable;
mod retained;
pub mod retained_value;
mod settled;
pub mod subject;
pub mod totals;

use std::sync::Arc;

use bytes::Bytes;
use codec::{MqttStr, QoS};
use tokio::sync::mpsc;

pub use counters::{ClusterCounters, ClusterFigures};
pub use link::ClusterThread;
pub use settled::Settled;

use crate::config::ClusterSettings;
use crate::message::Message;

/// Which local subscribers a message from the cluster is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Ordinary (non-shared) subscriptions: it came through a plain NATS subscription.
    Plain,
    /// The shared subscription with this whole `$share/group/filter` text: it came through that
    /// share's NATS queue group, which picked this node.
    Group(Arc<str>),
    /// No one: it is the topic's retained message from the cluster's bucket, for the node's
    /// retained store only (an empty payload clears it).
    Retained,
}

/// A message received from another node, for a shard to route locally.
#[derive(Debug)]
pub struct ClusterPublish {
    /// The topic name (validated by the shard).
    pub topic: MqttStr,
    /// The payload.
    pub payload: Bytes,
    /// The MQTT 5.0 properties that travel, encoded as in a PUBLISH (see [`headers`]).
    pub properties: Bytes,
    /// The QoS it was published with.
    pub qos: QoS,
    /// The RETAIN flag it was published with.
    pub retain: bool,
    /// Message Expiry Interval left when it left its node.
    pub expiry: Option<u32>,
    /// Which local subscribers it is for.
    pub scope: Scope,
}

/// A CONNECT's question to the cluster: may this node own `client_id`'s session?
#[derive(Debug)]
pub(crate) struct ClaimRequest {
    /// The client identifier.
    pub client_id: MqttStr,
    /// The CONNECT's Clean Start: the old session's state is not wanted.
    pub clean_start: bool,
    /// Where the CONNECT waits.
    pub shard: ring_runtime::ShardId,
    pub conn: ring_runtime::ConnId,
    /// The shard's number for this question (a stale answer is ignored).
    pub token: u64,
}

/// The cluster's answer to a [`ClaimRequest`].
#[derive(Debug)]
pub enum Ownership {
    /// This node owns the client id now; with the session's state (a snapshot) when another
    /// node released one.
    Owned(Option<Bytes>),
    /// The owning node is alive but did not release the session: refuse the CONNECT (0x88,
    /// the client retries).
    Unavailable,
}

/// A claim's outcome, posted to the shard where the CONNECT waits.
#[derive(Debug)]
pub struct OwnershipAnswer {
    pub conn: ring_runtime::ConnId,
    pub token: u64,
    pub client_id: MqttStr,
    pub outcome: Ownership,
}

/// Another node takes `client_id` over: release its session here (the connection closes with
/// 0x8E) and reply with its state (`None`: no session, or Clean Start).
#[derive(Debug)]
pub struct ReleaseRequest {
    pub client_id: MqttStr,
    pub clean_start: bool,
    pub reply: tokio::sync::oneshot::Sender<Option<Vec<u8>>>,
    /// Times forwarded between shards looking for the session.
    pub hops: u8,
    /// A copy this node recovered from its store while another node owns the client id now:
    /// ended here without touching what is mirrored (the owner's now).
    pub stale: bool,
}

/// What a shard asks the cluster thread to mirror of a session that outlives its connection
/// (`cluster/mirror.rs`, `shard/mirror.rs`).
#[derive(Debug)]
pub(crate) enum MirrorOp {
    /// Its client is connected: its snapshot without messages (subscriptions, expiry,
    /// protocol), written at the CONNECT and at every change of its subscriptions;
    /// `purge_queue`: it was offline, and the copies mirrored meanwhile go.
    Connected {
        client_id: MqttStr,
        snapshot: Bytes,
        purge_queue: bool,
    },
    /// Its client disconnected: its whole snapshot.
    Offline { client_id: MqttStr, snapshot: Bytes },
    /// A QoS 1/2 copy queued for it while offline (`encode_queued_message`).
    Queued { client_id: MqttStr, message: Bytes },
    /// It ended: nothing of it is mirrored any more.
    Forget { client_id: MqttStr },
    /// It ended on this node (not moved): the client id's owner record goes, if it still
    /// names this node run (compare-and-set on its revision), so ids used once do not stay.
    Ended { client_id: MqttStr },
}

/// A change of the local interest in one filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interest {
    /// The whole filter text (`$share/...` included).
    pub filter: String,
    /// +1: one more local subscription; -1: one fewer.
    pub delta: i32,
}

/// A message on its way to NATS.
#[derive(Debug)]
pub(crate) struct Outbound {
    pub message: Arc<Message>,
    /// Its node served the matching shared subscriptions itself (NATS was down when it was
    /// published): the other nodes' queue groups must not serve them again.
    pub shares_served: bool,
    /// A QoS 1/2 message from a client whose acknowledgement waits: its shard and number
    /// there, settled once it is sent or kept (`settled.rs`).
    pub settle: Option<(ring_runtime::ShardId, u64)>,
}

/// What the shards hold of the cluster link.
#[derive(Debug)]
pub struct ClusterLink {
    outbound: mpsc::Sender<Outbound>,
    interest: mpsc::UnboundedSender<Interest>,
    claims: mpsc::Sender<ClaimRequest>,
    mirror: mpsc::Sender<MirrorOp>,
    /// The link's counters.
    pub counters: Arc<ClusterCounters>,
    /// How far each shard's messages have settled.
    pub settled: Arc<Settled>,
}

/// The receiving ends the cluster thread takes at start.
#[derive(Debug)]
pub struct ClusterQueues {
    outbound: mpsc::Receiver<Outbound>,
    interest: mpsc::UnboundedReceiver<Interest>,
    claims: mpsc::Receiver<ClaimRequest>,
    mirror: mpsc::Receiver<MirrorOp>,
    settled: Arc<Settled>,
}

impl ClusterLink {
    /// A link bounded by `settings` for `shards` shards, and the queues its thread will read.
    pub fn new(settings: &ClusterSettings, shards: usize) -> (Self, ClusterQueues) {
        let settled = Arc::new(Settled::new(shards));
        let (outbound, outbound_rx) = mpsc::channel(settings.max_outbound_messages);
        let (interest, interest_rx) = mpsc::unbounded_channel();
        let (claims, claims_rx) = mpsc::channel(settings.max_outbound_messages);
        let (mirror, mirror_rx) = mpsc::channel(settings.max_outbound_messages);
        let link = Self {
            outbound,
            interest,
            claims,
            mirror,
            counters: Arc::new(ClusterCounters::default()),
            settled: Arc::clone(&settled),
        };
        let queues = ClusterQueues {
            outbound: outbound_rx,
            interest: interest_rx,
            claims: claims_rx,
            mirror: mirror_rx,
            settled,
        };
        (link, queues)
    }

    /// Hands a locally published message to the cluster (`shares_served`, `settle`: see
    /// [`Outbound`]); a full queue drops it, counted, and `false` says so. While NATS is down
    /// the queue is the node's buffer.
    pub(crate) fn send(
        &self,
        message: &Arc<Message>,
        shares_served: bool,
        settle: Option<(ring_runtime::ShardId, u64)>,
    ) -> bool {
        let outbound = Outbound {
            message: Arc::clone(message),
            shares_served,
            settle,
        };
        if self.outbound.try_send(outbound).is_err() {
            ClusterCounters::drop_one(
                &self.counters.dropped_queue_full,
                "cluster.max_outbound_messages are waiting for NATS",
            );
            return false;
        }
        true
    }

    /// Whether the main NATS connection is up.
    pub(crate) fn connected(&self) -> bool {
        self.counters
            .connected
            .load(std::sync::atomic::Ordering::Relaxed)
            == 1
    }

    /// Asks the cluster whether this node may own a client id; `false` when
    /// `cluster.max_outbound_messages` questions wait already.
    pub(crate) fn claim(&self, request: ClaimRequest) -> bool {
        self.claims.try_send(request).is_ok()
    }

    /// Hands a mirror operation to the cluster thread; a full queue drops it, counted.
    pub(crate) fn mirror(&self, op: MirrorOp) {
        if self.mirror.try_send(op).is_err() {
            ClusterCounters::drop_one(
                &self.counters.mirror_failures,
                "cluster.max_outbound_messages mirror writes are waiting",
            );
        }
    }

    /// Reports one more (`delta` 1) or one fewer (-1) local subscription to `filter`.
    /// Interest changes are never dropped (a lost one would leave a NATS subscription
    /// forever or miss one).
    pub(crate) fn interest(&self, filter: &str, delta: i32) {
        let change = Interest {
            filter: filter.to_owned(),
            delta,
        };
        // Fails only once the thread is gone (shutdown): nothing to keep in step then.
        let _ = self.interest.send(change);
    }
}
