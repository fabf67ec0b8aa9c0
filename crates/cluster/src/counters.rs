//! The cluster link's counters (`/metrics` `ringmq_cluster_*`, `$SYS/broker/cluster/...`).

use std::sync::atomic::{AtomicU64, Ordering};

pub use broker_api::ClusterFigures;

/// Counters the shards and the cluster thread update.
#[derive(Debug, Default)]
pub struct ClusterCounters {
    /// 1 while the NATS connection is up.
    pub connected: AtomicU64,
    /// Messages published to NATS.
    pub messages_out: AtomicU64,
    /// Messages received from NATS and handed to a shard.
    pub messages_in: AtomicU64,
    /// Outbound messages dropped: the queue to the cluster thread was full.
    pub dropped_queue_full: AtomicU64,
    /// Outbound messages dropped: NATS refused the publish.
    pub dropped_disconnected: AtomicU64,
    /// Inbound messages dropped: malformed, or the shard's mailbox was full.
    pub dropped_inbound: AtomicU64,
    /// Slow-consumer events of this node's NATS connections: a message arrived for a NATS
    /// subscription whose reader had no room (`async-nats` drops it; each event is one message
    /// lost, events beyond the client's event queue go unseen).
    pub slow_consumer: AtomicU64,
    /// Times the main NATS connection was lost (messages in flight inside NATS then may be).
    pub nats_disconnects: AtomicU64,
    /// Replays run (after a NATS connection loss or a slow-consumer event).
    pub replays: AtomicU64,
    /// Messages replays handed to the inbound path (before its duplicate check).
    pub replayed: AtomicU64,
    /// QoS 1/2 messages JetStream acknowledged (kept for replays).
    pub reliable_stored: AtomicU64,
    /// QoS 1/2 messages JetStream did not acknowledge within `cluster.ack_timeout_ms`,
    /// publishing again included (given up: not kept for replays).
    pub reliable_failures: AtomicU64,
    /// QoS 1/2 publishes made again because JetStream had not acknowledged them (no answer in
    /// time, an error, or the NATS connection lost meanwhile).
    pub reliable_retries: AtomicU64,
    /// PUBACK / PUBREC refused to publishers because the cluster did not keep their message
    /// (5.0: a negative reason code; 3.1.1: the connection closed without it).
    pub acks_refused: AtomicU64,
    /// NATS subscriptions held for local interest.
    pub subscriptions: AtomicU64,
    /// Retained messages (and clears) the cluster's bucket acknowledged.
    pub retained_out: AtomicU64,
    /// Retained records written to the bucket again (JetStream had not acknowledged them).
    pub retained_retries: AtomicU64,
    /// Retained records of this node's store written back to the bucket after a restart (the
    /// bucket lacked them or held an older record).
    pub retained_written_back: AtomicU64,

    /// Retained messages (and clears) from the bucket applied to this node's store.
    pub retained_in: AtomicU64,
    /// Retained messages not written to the bucket (queue full, NATS down, write refused).
    pub retained_failures: AtomicU64,
    /// 1 once the session ownership buckets are open.
    pub ownership_ready: AtomicU64,
    /// Sessions taken over from another node.
    pub sessions_taken_over: AtomicU64,
    /// Sessions released to another node.
    pub sessions_released: AtomicU64,
    /// Client ids taken from a node that was gone (its sessions' state lost).
    pub sessions_lost: AtomicU64,
    /// Sessions of a node that was gone resumed here from the JetStream mirror.
    pub sessions_recovered: AtomicU64,
    /// QoS 1/2 copies queued into sessions recovered from a dead node, read from the replay
    /// stream (what the dead node may not have delivered).
    pub sessions_replayed: AtomicU64,
    /// Recovered sessions whose missed messages could not be read from the replay stream.
    pub sessions_replay_failures: AtomicU64,
    /// QoS 1/2 messages routed to the sessions this node recovered from its own store at a
    /// restart, read from the replay stream (what arrived while the node was down).
    pub restart_replayed: AtomicU64,
    /// Reads of what the sessions recovered from the store at a restart missed that failed or
    /// ran out of time (a node replay from the same start stands in).
    pub restart_replay_failures: AtomicU64,
    /// Copies read back for recovered sessions (from a dead node's mirror, or from this node's
    /// store at a restart) that did not fit `queues.max_queued_messages`: the oldest, dropped.
    pub recovered_dropped: AtomicU64,
    /// CONNECTs admitted without checking the client id across nodes (no ownership bucket,
    /// or NATS did not answer).
    pub ownership_unchecked: AtomicU64,
    /// CONNECTs of sessions kept across connections refused (0x88) because their client id
    /// could not be checked across nodes (`cluster.admit_unchecked_sessions = false`).
    pub ownership_refused: AtomicU64,
    /// Offline sessions' state mirrored to JetStream: records, queued copies and removals.
    pub mirror_writes: AtomicU64,
    /// Offline sessions' state not mirrored to JetStream (queue full, NATS down, refused).
    pub mirror_failures: AtomicU64,
    /// QoS 2 delivery steps written to the delivery journal.
    pub journal_writes: AtomicU64,
    /// QoS 2 delivery steps not journaled (queue full, or JetStream did not keep them within
    /// `cluster.ack_timeout_ms`): their packets left unjournaled.
    pub journal_failures: AtomicU64,
    /// The cluster's totals, summed from the nodes' heartbeats.
    pub totals: TotalCounters,
}

impl ClusterCounters {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one dropped message in `counter`, and logs a warning at the 1st, 2nd, 4th, 8th...
    /// (never silent, never a flood).
    pub fn drop_one(counter: &AtomicU64, why: &'static str) {
        if let Some(count) = Self::count_one_to_warn(counter) {
            tracing::warn!(count, "cluster: message dropped: {why}");
        }
    }

    /// Counts one event in `counter`; the new count when it is the 1st, 2nd, 4th, 8th... (for
    /// a warning that is never silent and never a flood).
    pub fn count_one_to_warn(counter: &AtomicU64) -> Option<u64> {
        let count = counter.fetch_add(1, Ordering::Relaxed) + 1;
        count.is_power_of_two().then_some(count)
    }

    /// Sets a gauge.
    pub fn set(gauge: &AtomicU64, value: u64) {
        gauge.store(value, Ordering::Relaxed);
    }

    /// The current values.
    pub fn figures(&self) -> ClusterFigures {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ClusterFigures {
            connected: get(&self.connected),
            messages_out: get(&self.messages_out),
            messages_in: get(&self.messages_in),
            dropped_queue_full: get(&self.dropped_queue_full),
            dropped_disconnected: get(&self.dropped_disconnected),
            dropped_inbound: get(&self.dropped_inbound),
            slow_consumer: get(&self.slow_consumer),
            nats_disconnects: get(&self.nats_disconnects),
            replays: get(&self.replays),
            replayed: get(&self.replayed),
            reliable_stored: get(&self.reliable_stored),
            reliable_failures: get(&self.reliable_failures),
            reliable_retries: get(&self.reliable_retries),
            acks_refused: get(&self.acks_refused),
            subscriptions: get(&self.subscriptions),
            retained_out: get(&self.retained_out),
            retained_retries: get(&self.retained_retries),
            retained_written_back: get(&self.retained_written_back),
            retained_in: get(&self.retained_in),
            retained_failures: get(&self.retained_failures),
            ownership_ready: get(&self.ownership_ready),
            sessions_taken_over: get(&self.sessions_taken_over),
            sessions_released: get(&self.sessions_released),
            sessions_lost: get(&self.sessions_lost),
            sessions_recovered: get(&self.sessions_recovered),
            sessions_replayed: get(&self.sessions_replayed),
            sessions_replay_failures: get(&self.sessions_replay_failures),
            restart_replayed: get(&self.restart_replayed),
            restart_replay_failures: get(&self.restart_replay_failures),
            recovered_dropped: get(&self.recovered_dropped),
            ownership_unchecked: get(&self.ownership_unchecked),
            ownership_refused: get(&self.ownership_refused),
            mirror_writes: get(&self.mirror_writes),
            mirror_failures: get(&self.mirror_failures),
            journal_writes: get(&self.journal_writes),
            journal_failures: get(&self.journal_failures),
            total_nodes: get(&self.totals.nodes),
            total_clients: get(&self.totals.clients),
            total_sessions: get(&self.totals.sessions),
            total_subscriptions: get(&self.totals.subscriptions),
            total_received: get(&self.totals.received),
            total_sent: get(&self.totals.sent),
        }
    }
}

/// The cluster's totals as last summed.
#[derive(Debug, Default)]
pub struct TotalCounters {
    /// Nodes with a live heartbeat.
    pub nodes: AtomicU64,
    /// Those nodes, one row each (at most [`crate::totals::MAX_LISTED_NODES`]), for the admin
    /// API and the dashboard; replaced whole each heartbeat.
    pub listed: std::sync::Mutex<Vec<broker_api::ClusterNode>>,
    pub clients: AtomicU64,
    pub sessions: AtomicU64,
    pub subscriptions: AtomicU64,
    pub received: AtomicU64,
    pub sent: AtomicU64,
}
