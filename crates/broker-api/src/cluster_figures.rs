//! [`ClusterFigures`]: what the cluster link has counted, as plain numbers; [`ClusterNode`]:
//! one live node as its heartbeat describes it.

/// A snapshot of the cluster link's counters (the cluster crate's `ClusterCounters`), for
/// `$SYS` and `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterFigures {
    /// 1 while the NATS connection is up.
    pub connected: u64,
    /// Messages published to NATS.
    pub messages_out: u64,
    /// Messages received from NATS.
    pub messages_in: u64,
    /// Outbound messages dropped at the full queue.
    pub dropped_queue_full: u64,
    /// Outbound messages NATS refused.
    pub dropped_disconnected: u64,
    /// Inbound messages dropped.
    pub dropped_inbound: u64,
    /// Slow-consumer events (messages lost at this node's NATS client).
    pub slow_consumer: u64,
    /// Times the main NATS connection was lost.
    pub nats_disconnects: u64,
    /// Replays run.
    pub replays: u64,
    /// Messages replays handed on.
    pub replayed: u64,
    /// QoS 1/2 messages kept for replays.
    pub reliable_stored: u64,
    /// QoS 1/2 messages JetStream did not keep within `cluster.ack_timeout_ms`.
    pub reliable_failures: u64,
    /// QoS 1/2 publishes made again (JetStream had not acknowledged them).
    pub reliable_retries: u64,
    /// PUBACK / PUBREC refused because the cluster did not keep the message.
    pub acks_refused: u64,
    /// NATS subscriptions held.
    pub subscriptions: u64,
    /// Retained messages the bucket acknowledged.
    pub retained_out: u64,
    /// Retained records written to the bucket again (not acknowledged in time).
    pub retained_retries: u64,
    /// Retained records of this node's store written back to the bucket after a restart.
    pub retained_written_back: u64,
    /// Retained messages from the bucket applied here.
    pub retained_in: u64,
    /// Retained messages not written to the bucket.
    pub retained_failures: u64,
    /// 1 once the session ownership buckets are open.
    pub ownership_ready: u64,
    /// Sessions taken over from another node.
    pub sessions_taken_over: u64,
    /// Sessions released to another node.
    pub sessions_released: u64,
    /// Client ids taken from a node that was gone.
    pub sessions_lost: u64,
    /// Sessions of a node that was gone resumed here from the mirror.
    pub sessions_recovered: u64,
    /// Copies queued into recovered sessions from the replay stream.
    pub sessions_replayed: u64,
    /// Recovered sessions whose missed messages were not read.
    pub sessions_replay_failures: u64,
    /// Messages routed to sessions recovered from the store at a restart, from the replay
    /// stream.
    pub restart_replayed: u64,
    /// Reads for sessions recovered from the store at a restart that failed.
    pub restart_replay_failures: u64,
    /// Copies read back for recovered sessions dropped at `queues.max_queued_messages`.
    pub recovered_dropped: u64,
    /// CONNECTs admitted without the check across nodes.
    pub ownership_unchecked: u64,
    /// Persistent sessions' CONNECTs refused because the check across nodes could not be made.
    pub ownership_refused: u64,
    /// Offline sessions' state mirrored.
    pub mirror_writes: u64,
    /// Offline sessions' state not mirrored.
    pub mirror_failures: u64,
    /// QoS 2 delivery steps journaled.
    pub journal_writes: u64,
    /// QoS 2 delivery steps whose packets left unjournaled.
    pub journal_failures: u64,
    /// Nodes with a live heartbeat (this one included), and their summed figures.
    pub total_nodes: u64,
    pub total_clients: u64,
    pub total_sessions: u64,
    pub total_subscriptions: u64,
    pub total_received: u64,
    pub total_sent: u64,
}

/// One live node of the cluster (its heartbeat record has not expired), as that record
/// describes it: the figures each node's heartbeat carries and the cluster's totals sum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// Its `cluster.node_id`.
    pub node_id: String,
    /// Which run of it: a nonce drawn at each start (a restarted node is a new run, and its
    /// old run's record lingers until it expires).
    pub run: String,
    /// Whether it is the node answering.
    pub this_node: bool,
    /// Clients connected to it.
    pub clients: u64,
    /// Sessions it holds, connected or not.
    pub sessions: u64,
    /// Subscriptions it holds.
    pub subscriptions: u64,
    /// PUBLISH packets it received from clients since it started.
    pub received: u64,
    /// PUBLISH packets it sent to clients since it started.
    pub sent: u64,
    /// When its last heartbeat was written (the NATS server's clock).
    pub heartbeat_at: std::time::SystemTime,
}
