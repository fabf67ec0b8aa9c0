//! What the shards and the cluster link tell each other: a message from another node, the
//! questions about client-id ownership and their answers, the session mirror's writes, and the
//! [`ClusterInbox`] the link posts into. Plain data, so the shard's mailbox can name them
//! without knowing the link (NATS, tokio) behind them.

use std::sync::Arc;

use bytes::Bytes;
use codec::{MqttStr, QoS};
use ring_runtime::ShardId;

use crate::ClusterFigures;
use crate::message::Message;
use crate::reply::Reply;

/// Which local subscribers a message from the cluster is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Ordinary (non-shared) subscriptions: it came through a plain NATS subscription.
    Plain,
    /// The ordinary subscriptions of every session but these, which had the message read back
    /// for them alone (a QoS 2 message coming again, as in a node replay).
    PlainExcept(Vec<MqttStr>),
    /// The shared subscription with this whole `$share/group/filter` text: it came through that
    /// share's NATS queue group, which picked this node.
    Group(Arc<str>),
    /// The plain subscriptions of this client's session only: a message the session missed
    /// while the node it was on died, read back from the replay stream for it alone (it may
    /// have reached this node for other subscribers already).
    Session(MqttStr),
    /// No one: it is the topic's retained message from the cluster's bucket, for the node's
    /// retained store only (an empty payload clears it).
    Retained,
}

/// A retained message this node accepted from a client, recovered from its store at start:
/// the cluster writes it back to its bucket when the bucket lacks it or holds an older record
/// (docs/cluster.md, "Retained messages").
#[derive(Debug, Clone)]
pub struct AcceptedRetained {
    pub message: Arc<Message>,
    /// When this node accepted it (wall clock).
    pub accepted_at: std::time::SystemTime,
}

/// A message received from another node, for a shard to route locally.
#[derive(Debug, Clone)]
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
    /// Its [`Message::key`] (0: none).
    pub key: u64,
}

/// A CONNECT's question to the cluster: may this node own `client_id`'s session?
#[derive(Debug)]
pub struct ClaimRequest {
    /// The client identifier.
    pub client_id: MqttStr,
    /// The CONNECT's Clean Start: the old session's state is not wanted.
    pub clean_start: bool,
    /// Whether the CONNECT resumes a session or leaves one behind (no Clean Start, or a
    /// Session Expiry Interval above 0): such a CONNECT is refused when the check across nodes
    /// cannot be made (`cluster.admit_unchecked_sessions`), a clean one is admitted.
    pub keeps_session: bool,
    /// Where the CONNECT waits.
    pub shard: ring_runtime::ShardId,
    pub conn: ring_runtime::ConnId,
    /// The shard's number for this question (a stale answer is ignored).
    pub token: u64,
    /// Set by the shard when the CONNECT's connection closes before the answer (the client
    /// gave up waiting): the claim then takes nothing more (no release asked of another node,
    /// no dead node's session recovered); what it took already stays here, detached.
    pub abandoned: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ClaimRequest {
    /// Whether the CONNECT's connection closed while the claim was under way.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(std::sync::atomic::Ordering::Acquire)
    }
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
    pub reply: Reply<Option<Vec<u8>>>,
    /// Times forwarded between shards looking for the session.
    pub hops: u8,
}

/// What a shard asks the cluster thread to mirror of a session that outlives its connection
/// (the cluster crate's `mirror.rs`, the shard's `mirror.rs`).
#[derive(Debug)]
pub enum MirrorOp {
    /// Its client is connected: its snapshot without messages (subscriptions, expiry,
    /// protocol), written at the CONNECT and at every change of its subscriptions;
    /// `purge_queue`: it was offline (or came from another node), and the copies mirrored
    /// meanwhile go, once the snapshot is written.
    Connected {
        client_id: MqttStr,
        snapshot: Bytes,
        purge_queue: bool,
    },
    /// Its client disconnected: its whole snapshot; `purge_queue`: it came from another node
    /// (its snapshot holds what that node queued for it), and the copies that node mirrored
    /// go, once the snapshot is written.
    Offline {
        client_id: MqttStr,
        snapshot: Bytes,
        purge_queue: bool,
    },
    /// A QoS 1/2 copy queued for it while offline (`encode_queued_message`).
    Queued { client_id: MqttStr, message: Bytes },
    /// It ended: nothing of it is mirrored any more.
    Forget { client_id: MqttStr },
    /// It ended on this node (not moved): the client id's owner record goes, if it still
    /// names this node run (compare-and-set on its revision), so ids used once do not stay.
    Ended { client_id: MqttStr },
}

/// One step of a QoS 2 delivery to a session mirrored in the cluster, written to the delivery
/// journal before the packet that makes it leaves (docs/cluster.md, "Exactly once across a
/// node's death"): the node that takes the session over after this node's death resends what
/// was in flight under the same packet ids and does not deliver again what was delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    /// The session's client identifier.
    pub client_id: MqttStr,
    /// The packet identifier of the delivery.
    pub packet_id: u16,
    /// What happened to it.
    pub step: JournalStep,
}

/// What a [`JournalEntry`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalStep {
    /// The PUBLISH of the message with this [`Message::key`] goes out under the packet id.
    Sent { key: u64 },
    /// The client's PUBREC came: the PUBREL goes out (the message is delivered; only the
    /// packet id's release is left).
    Released,
    /// The client's PUBCOMP came: the packet id is free (written without holding anything:
    /// lost with the node, its PUBREL is only sent once more).
    Completed,
}

/// What the cluster link posts to a shard's mailbox.
#[derive(Debug)]
pub enum ClusterInbound {
    /// A message from another node, for local subscribers only.
    Publish(Box<ClusterPublish>),
    /// The cluster's answer to a CONNECT waiting for its client id.
    Ownership(Box<OwnershipAnswer>),
    /// Another node takes a client over: release its session.
    Release(Box<ReleaseRequest>),
    /// The owner record of a client whose session this node released names another node (or
    /// none) now: the stored copy kept here since the release goes.
    ReleaseTaken(MqttStr),
}

/// The shards' mailboxes as the cluster link sees them.
pub trait ClusterInbox: Send + Sync {
    /// How many shards there are (shards are `0..shard_count`).
    fn shard_count(&self) -> usize;

    /// Posts `messages` to `shard` in order; `Err` when its mailbox refused them (full, or the
    /// broker is stopping): nothing was posted.
    fn post(&self, shard: ShardId, messages: Vec<ClusterInbound>) -> Result<(), PostRefused>;
}

/// A shard's mailbox refused a batch (over its bound, or the broker is stopping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the shard's mailbox refused the batch")]
pub struct PostRefused;

/// The cluster link as the shards see it; `None` on a single node.
pub trait ClusterPort: Send + Sync {
    /// Hands a locally published message to the cluster (`shares_served`: this node served
    /// the matching shared subscriptions itself; `settle`: the shard and number its
    /// acknowledgement waits under); `false` when its bounded queue is full (dropped, counted).
    fn send(
        &self,
        message: &Arc<Message>,
        shares_served: bool,
        settle: Option<(ShardId, u64)>,
    ) -> bool;

    /// Whether the link's main NATS connection is up.
    fn connected(&self) -> bool;

    /// Whether a QoS 1/2 acknowledgement waits for the cluster to keep its message now:
    /// always, unless `cluster.ack_while_disconnected` is set and NATS is down.
    fn acks_wait(&self) -> bool;

    /// One more (`delta` 1) or one fewer (-1) local subscription to `filter`.
    fn interest(&self, filter: &str, delta: i32);

    /// Asks whether this node may own a client id; `false` when too many questions wait.
    fn claim(&self, request: ClaimRequest) -> bool;

    /// A session mirror write; a full queue drops it, counted.
    fn mirror(&self, op: MirrorOp);

    /// Writes one turn's QoS 2 delivery steps of `shard` to the delivery journal under
    /// `number` (one above the shard's last; settled in order: [`Self::journal_settled`]);
    /// `false` when nothing is journaled (no replay window, the journal not open yet, or its
    /// queue full: counted), and their packets need not wait.
    fn journal(&self, shard: ShardId, number: u64, entries: Vec<JournalEntry>) -> bool;

    /// The highest journal number of `shard` written (or given up after
    /// `cluster.ack_timeout_ms`, counted): the packets held behind it may leave.
    fn journal_settled(&self, shard: ShardId) -> u64;

    /// A message from the cluster was dropped on arrival (`why`, logged at most once a while).
    fn drop_inbound(&self, why: &'static str);

    /// The highest acknowledgement number the cluster settled for `shard`.
    fn settled(&self, shard: ShardId) -> u64;

    /// Whether the cluster gave up acknowledgement number `number` of `shard` (JetStream did
    /// not keep its message): its publisher is refused. Asked in increasing order per shard.
    fn take_failed(&self, shard: ShardId, number: u64) -> bool;

    /// `cluster.ack_timeout_ms`: the longest an acknowledgement waits for the cluster; past
    /// it the publisher is refused.
    fn ack_timeout(&self) -> std::time::Duration;

    /// Counts one acknowledgement refused to a publisher.
    fn count_refused_ack(&self);

    /// The link's figures now.
    fn figures(&self) -> ClusterFigures;

    /// The live nodes as the last heartbeat round read them (this one included), by node id
    /// and run; empty until the heartbeat bucket is open.
    fn nodes(&self) -> Vec<crate::ClusterNode>;
}
