//! The `[cluster]` families of `/metrics` (`ringmq_cluster_*`): the link's figures and the
//! cluster's totals (docs/cluster.md, "Metrics").

use super::state::OpsState;
use ops::exposition::{Exposition, Kind};

/// The cluster link's figures (`[cluster]`; nothing on a single node).
pub(super) fn cluster(doc: &mut Exposition, state: &OpsState) {
    let Some(link) = &state.shared.links.cluster else {
        return;
    };
    let f = link.figures();
    let families: [(&str, Kind, &str, u64); 36] = [
        (
            "ringmq_cluster_connected",
            Kind::Gauge,
            "1 while the NATS connection is up.",
            f.connected,
        ),
        (
            "ringmq_cluster_messages_out_total",
            Kind::Counter,
            "Messages published on this node and sent to NATS.",
            f.messages_out,
        ),
        (
            "ringmq_cluster_messages_in_total",
            Kind::Counter,
            "Messages from other nodes received from NATS and handed to a shard.",
            f.messages_in,
        ),
        (
            "ringmq_cluster_dropped_queue_full_total",
            Kind::Counter,
            "Messages for the cluster dropped: cluster.max_outbound_messages were waiting.",
            f.dropped_queue_full,
        ),
        (
            "ringmq_cluster_dropped_disconnected_total",
            Kind::Counter,
            "Messages for the cluster dropped: NATS refused the publish (e.g. over its max_payload).",
            f.dropped_disconnected,
        ),
        (
            "ringmq_cluster_dropped_inbound_total",
            Kind::Counter,
            "Messages from the cluster dropped: malformed, or a shard's mailbox was full.",
            f.dropped_inbound,
        ),
        (
            "ringmq_cluster_dropped_slow_consumer_total",
            Kind::Counter,
            "Messages from the cluster dropped by this node's NATS client: a subscription's reader had no room (slow-consumer events).",
            f.slow_consumer,
        ),
        (
            "ringmq_cluster_nats_disconnects_total",
            Kind::Counter,
            "Times the NATS connection was lost (messages in flight inside NATS may have been lost).",
            f.nats_disconnects,
        ),
        (
            "ringmq_cluster_replays_total",
            Kind::Counter,
            "Replays of QoS 1/2 messages from JetStream run after a NATS connection loss or a slow-consumer event.",
            f.replays,
        ),
        (
            "ringmq_cluster_replayed_messages_total",
            Kind::Counter,
            "Messages replays handed on (those already received are then dropped as duplicates).",
            f.replayed,
        ),
        (
            "ringmq_cluster_reliable_stored_total",
            Kind::Counter,
            "QoS 1/2 messages published here that JetStream acknowledged (kept for replays).",
            f.reliable_stored,
        ),
        (
            "ringmq_cluster_reliable_failures_total",
            Kind::Counter,
            "QoS 1/2 messages published here that JetStream did not keep within cluster.ack_timeout_ms, publishing again included.",
            f.reliable_failures,
        ),
        (
            "ringmq_cluster_reliable_retries_total",
            Kind::Counter,
            "QoS 1/2 publishes made again because JetStream had not acknowledged them (no answer in time, an error, or the NATS connection lost).",
            f.reliable_retries,
        ),
        (
            "ringmq_cluster_acks_refused_total",
            Kind::Counter,
            "PUBACK/PUBREC refused because the cluster did not keep the message (5.0: reason 0x80 or 0x97; 3.1.1: connection closed).",
            f.acks_refused,
        ),
        (
            "ringmq_cluster_subscriptions",
            Kind::Gauge,
            "NATS subscriptions held for this node's subscriptions.",
            f.subscriptions,
        ),
        (
            "ringmq_cluster_retained_out_total",
            Kind::Counter,
            "Retained messages (and clears) the cluster's retained bucket acknowledged.",
            f.retained_out,
        ),
        (
            "ringmq_cluster_retained_retries_total",
            Kind::Counter,
            "Retained records written to the cluster's bucket again (JetStream had not acknowledged them).",
            f.retained_retries,
        ),
        (
            "ringmq_cluster_retained_written_back_total",
            Kind::Counter,
            "Retained records of this node's store written back to the cluster's bucket after a restart (the bucket lacked them or held an older record).",
            f.retained_written_back,
        ),
        (
            "ringmq_cluster_retained_in_total",
            Kind::Counter,
            "Retained messages (and clears) from the cluster's bucket applied to this node's store.",
            f.retained_in,
        ),
        (
            "ringmq_cluster_retained_failures_total",
            Kind::Counter,
            "Retained messages not written to the cluster's bucket (queue full, NATS down, write refused).",
            f.retained_failures,
        ),
        (
            "ringmq_cluster_ownership_ready",
            Kind::Gauge,
            "1 once the session ownership buckets are open.",
            f.ownership_ready,
        ),
        (
            "ringmq_cluster_sessions_taken_over_total",
            Kind::Counter,
            "Sessions taken over from another node.",
            f.sessions_taken_over,
        ),
        (
            "ringmq_cluster_sessions_released_total",
            Kind::Counter,
            "Sessions released to another node.",
            f.sessions_released,
        ),
        (
            "ringmq_cluster_sessions_lost_total",
            Kind::Counter,
            "Client ids taken from a node that was gone (their sessions' state not recovered).",
            f.sessions_lost,
        ),
        (
            "ringmq_cluster_ownership_unchecked_total",
            Kind::Counter,
            "CONNECTs admitted without checking the client id across nodes (NATS down, or no bucket).",
            f.ownership_unchecked,
        ),
        (
            "ringmq_cluster_ownership_refused_total",
            Kind::Counter,
            "CONNECTs of persistent sessions refused (0x88) because their client id could not be checked across nodes.",
            f.ownership_refused,
        ),
        (
            "ringmq_cluster_sessions_recovered_total",
            Kind::Counter,
            "Sessions of a node that was gone resumed here from the JetStream mirror.",
            f.sessions_recovered,
        ),
        (
            "ringmq_cluster_sessions_replayed_messages_total",
            Kind::Counter,
            "QoS 1/2 copies queued into sessions recovered from a dead node, read from the replay stream.",
            f.sessions_replayed,
        ),
        (
            "ringmq_cluster_sessions_replay_failures_total",
            Kind::Counter,
            "Recovered sessions whose missed messages could not be read from the replay stream.",
            f.sessions_replay_failures,
        ),
        (
            "ringmq_cluster_recovered_copies_dropped_total",
            Kind::Counter,
            "Copies read back for recovered sessions (a dead node's, or this node's own at a restart) dropped, the oldest first, because they did not fit queues.max_queued_messages.",
            f.recovered_dropped,
        ),
        (
            "ringmq_cluster_restart_replayed_messages_total",
            Kind::Counter,
            "QoS 1/2 messages routed to the sessions recovered from this node's store at a restart, read from the replay stream.",
            f.restart_replayed,
        ),
        (
            "ringmq_cluster_restart_replay_failures_total",
            Kind::Counter,
            "Reads for the sessions recovered from this node's store at a restart that failed or ran out of time.",
            f.restart_replay_failures,
        ),
        (
            "ringmq_cluster_mirror_writes_total",
            Kind::Counter,
            "Offline sessions' records, queued copies and removals mirrored to JetStream.",
            f.mirror_writes,
        ),
        (
            "ringmq_cluster_mirror_failures_total",
            Kind::Counter,
            "Offline sessions' state not mirrored to JetStream (queue full, NATS down, refused).",
            f.mirror_failures,
        ),
        (
            "ringmq_cluster_journal_writes_total",
            Kind::Counter,
            "QoS 2 delivery steps to mirrored sessions written to the delivery journal.",
            f.journal_writes,
        ),
        (
            "ringmq_cluster_journal_failures_total",
            Kind::Counter,
            "QoS 2 delivery steps whose packets left unjournaled (queue full, or JetStream did not keep them within cluster.qos2_journal_wait_ms).",
            f.journal_failures,
        ),
    ];
    for (name, kind, help, value) in families {
        doc.family(name, kind, help);
        doc.sample(name, &[], value);
    }
    cluster_totals(doc, &f);
}

/// The cluster's totals, summed from every live node's heartbeat.
fn cluster_totals(doc: &mut Exposition, f: &cluster::ClusterFigures) {
    let totals: [(&str, &str, u64); 6] = [
        (
            "ringmq_cluster_total_nodes",
            "Nodes of the cluster with a live heartbeat.",
            f.total_nodes,
        ),
        (
            "ringmq_cluster_total_clients",
            "Clients connected to all live nodes.",
            f.total_clients,
        ),
        (
            "ringmq_cluster_total_sessions",
            "Sessions held by all live nodes.",
            f.total_sessions,
        ),
        (
            "ringmq_cluster_total_subscriptions",
            "Subscriptions held by all live nodes.",
            f.total_subscriptions,
        ),
        (
            "ringmq_cluster_total_messages_received",
            "PUBLISH packets all live nodes received from clients since they started.",
            f.total_received,
        ),
        (
            "ringmq_cluster_total_messages_sent",
            "PUBLISH packets all live nodes sent to clients since they started.",
            f.total_sent,
        ),
    ];
    for (name, help, value) in totals {
        doc.family(name, Kind::Gauge, help);
        doc.sample(name, &[], value);
    }
}
