//! `GET /metrics`: the broker's figures as `ringmq_*` families (docs/operations.md lists each
//! one). Everything is read from atomics the shards and the store thread keep: a scrape never
//! asks a shard anything.

use std::sync::atomic::Ordering;

use super::state::OpsState;
use crate::metrics::{
    DropReason, HistogramSnapshot, Listener, Metrics, PerQos, Refusal, ShardDetail, Snapshot,
};
use ops::exposition::{Buckets, Exposition, Kind};

/// Picks one per-QoS counter set out of a shard's figures.
type PerQosField = fn(&ShardDetail) -> &PerQos;

/// The `qos` label values, in `PerQos` order.
const QOS: [&str; 3] = ["0", "1", "2"];

/// The whole document.
pub fn render(state: &OpsState) -> String {
    let mut doc = Exposition::default();
    let metrics = &state.shared.metrics;
    // Drops by reason are read before the totals (a shard counts the total first): a
    // scrape's reasons never add up to more than its total, and to exactly it once quiet.
    let drops_by_reason = DropReason::ALL.map(|reason| {
        sum(metrics, |shard| {
            metrics.detail(shard).dropped[reason.index()].load(Ordering::Relaxed)
        })
    });
    std::sync::atomic::fence(Ordering::Acquire);
    let totals = metrics.snapshot();
    info(&mut doc, state);
    clients(&mut doc, state, &totals);
    messages(&mut doc, &totals);
    by_qos(&mut doc, metrics);
    drops(&mut doc, &drops_by_reason);
    refusals(&mut doc, metrics);
    queues(&mut doc, state, metrics);
    shards(&mut doc, state, metrics);
    auth(&mut doc, state);
    store(&mut doc, state);
    bridges(&mut doc, state);
    super::collect_cluster::cluster(&mut doc, state);
    super::collect_quic::quic(&mut doc, state, state.quic_listeners);
    super::collect_events::webhooks(&mut doc, state);
    super::collect_slow::slow_subscribers(&mut doc, state);
    doc.finish()
}

fn info(doc: &mut Exposition, state: &OpsState) {
    doc.family(
        "ringmq_info",
        Kind::Gauge,
        "The broker's version and I/O backend (always 1).",
    );
    let version = env!("CARGO_PKG_VERSION");
    let labels = [("backend", state.backend_label()), ("version", version)];
    doc.sample("ringmq_info", &labels, 1);
    let uptime = state.shared.time.uptime().as_secs_f64();
    doc.single(
        "ringmq_uptime_seconds",
        Kind::Gauge,
        "Seconds since the broker started.",
        uptime,
    );
}

fn clients(doc: &mut Exposition, state: &OpsState, totals: &Snapshot) {
    let open = state.shared.door.connections.load(Ordering::Relaxed);
    doc.single(
        "ringmq_connections_open",
        Kind::Gauge,
        "Client sockets open now (before and after CONNECT).",
        open,
    );
    doc.single(
        "ringmq_ip_bans_total",
        Kind::Counter,
        "Bans after failed logins: of an address (ip.ban_after_auth_failures) or of a username from an address (ip.ban_user_after_auth_failures).",
        state.shared.door.guard.bans_total(),
    );
    doc.family(
        "ringmq_listener_connections_open",
        Kind::Gauge,
        "Client sockets open now, by the kind of listener that accepted them.",
    );
    let metrics = &state.shared.metrics;
    for kind in Listener::ALL {
        let open = sum(metrics, |shard| {
            metrics.detail(shard).connections[kind.index()].load(Ordering::Relaxed)
        });
        doc.sample(
            "ringmq_listener_connections_open",
            &[("listener", kind.label())],
            open,
        );
    }
    let gauges = [
        (
            "ringmq_clients_connected",
            "Clients connected now (CONNECT accepted).",
            totals.clients_connected,
        ),
        (
            "ringmq_sessions",
            "Sessions held now, connected or not.",
            totals.clients_total,
        ),
        (
            "ringmq_subscriptions",
            "Subscriptions held by sessions now.",
            totals.subscriptions,
        ),
        (
            "ringmq_retained_messages",
            "Retained messages held.",
            totals.retained_messages,
        ),
        (
            "ringmq_delayed_pending",
            "Delayed messages ($delayed/) waiting to be published.",
            totals.delayed_pending,
        ),
        (
            "ringmq_retained_bytes",
            "Payload bytes of the retained messages held.",
            totals.retained_bytes,
        ),
    ];
    for (name, help, value) in gauges {
        doc.single(name, Kind::Gauge, help, value);
    }
}

fn messages(doc: &mut Exposition, totals: &Snapshot) {
    let counters = [
        (
            "ringmq_messages_received_total",
            "PUBLISH packets received from clients.",
            totals.messages_received,
        ),
        (
            "ringmq_messages_sent_total",
            "PUBLISH packets sent to clients.",
            totals.messages_sent,
        ),
        (
            "ringmq_messages_dropped_total",
            "Message copies dropped, all reasons (see ringmq_message_drops_total).",
            totals.messages_dropped,
        ),
        (
            "ringmq_bytes_received_total",
            "Bytes received from clients (all packets).",
            totals.bytes_received,
        ),
        (
            "ringmq_bytes_sent_total",
            "Bytes sent to clients (all packets).",
            totals.bytes_sent,
        ),
        (
            "ringmq_publishes_not_authorized_total",
            "PUBLISH packets refused as not authorized (client writes to $SYS included).",
            totals.publishes_not_authorized,
        ),
        (
            "ringmq_deliveries_not_authorized_total",
            "Copies not delivered because the rules in force do not let their subscriber read the topic.",
            totals.deliveries_not_authorized,
        ),
        (
            "ringmq_subscriptions_revoked_total",
            "Subscriptions removed because a backend, asked again after a reload, no longer lets their client read them.",
            totals.subscriptions_revoked,
        ),
        (
            "ringmq_wills_not_authorized_total",
            "Wills not authorized: CONNECTs refused for their will, wills dropped when they fired.",
            totals.wills_not_authorized,
        ),
        (
            "ringmq_deliveries_dropped_mailbox_full_total",
            "Copies dropped because another shard's mailbox was over runtime.max_pending_posts.",
            totals.deliveries_dropped_mailbox_full,
        ),
        (
            "ringmq_changes_beyond_window_total",
            "Replicated changes that arrived more than runtime.max_pending_changes ahead of a missing one (kept).",
            totals.changes_beyond_window,
        ),
        (
            "ringmq_publishes_held_for_order_total",
            "PUBLISH packets held until subscription changes another shard had already stamped reached this shard's replica (and, with runtime.subscribe_order = \"received\", retained ones, any while a removal stamped before them is in flight, and any beyond the messages a shard keeps, until every other shard had handled what it had received before them).",
            totals.publishes_held_for_order,
        ),
        (
            "ringmq_copies_owed_for_order_total",
            "Copies sent to a subscription applied after a message was routed, because its SUBSCRIBE may have reached the broker before that PUBLISH (runtime.subscribe_order = \"received\").",
            totals.copies_owed_for_order,
        ),
        (
            "ringmq_input_fences_expired_total",
            "PUBLISH turns whose input fence passed after waiting 250 ms instead of for the drains it asked other shards for (runtime.subscribe_order = \"received\").",
            totals.input_fences_expired,
        ),
        (
            "ringmq_partial_frame_closed_total",
            "Connections closed because their partial packet did not fit in limits.max_partial_frame_bytes.",
            totals.partial_frame_closed,
        ),
        (
            "ringmq_publishers_throttled_total",
            "Times a connection's reading was paused for going over its publish rate.",
            totals.publishers_throttled,
        ),
        (
            "ringmq_delayed_published_total",
            "Delayed messages published when their delay ran out.",
            totals.delayed_published,
        ),
        (
            "ringmq_delayed_refused_total",
            "Delayed PUBLISH packets refused for delayed.max_messages.",
            totals.delayed_refused,
        ),
        (
            "ringmq_connections_refused_overload_total",
            "Connections refused at accept in overload mode.",
            totals.refused_overload,
        ),
    ];
    for (name, help, value) in counters {
        doc.single(name, Kind::Counter, help, value);
    }
}

fn by_qos(doc: &mut Exposition, metrics: &Metrics) {
    let families: [(&str, &str, PerQosField); 4] = [
        (
            "ringmq_publish_received_total",
            "PUBLISH packets received from clients, by QoS.",
            |d| &d.received,
        ),
        (
            "ringmq_publish_received_payload_bytes_total",
            "Payload bytes of PUBLISH packets received, by QoS.",
            |d| &d.received_payload_bytes,
        ),
        (
            "ringmq_publish_sent_total",
            "PUBLISH packets sent to clients, by the QoS they were sent with.",
            |d| &d.sent,
        ),
        (
            "ringmq_publish_sent_payload_bytes_total",
            "Payload bytes of PUBLISH packets sent, by QoS.",
            |d| &d.sent_payload_bytes,
        ),
    ];
    for (name, help, field) in families {
        doc.family(name, Kind::Counter, help);
        for (q, label) in QOS.iter().enumerate() {
            let value = sum(metrics, |shard| {
                field(metrics.detail(shard))[q].load(Ordering::Relaxed)
            });
            doc.sample(name, &[("qos", *label)], value);
        }
    }
}

fn drops(doc: &mut Exposition, by_reason: &[u64; DropReason::ALL.len()]) {
    let name = "ringmq_message_drops_total";
    doc.family(
        name,
        Kind::Counter,
        "Message copies dropped, by reason (they add up to ringmq_messages_dropped_total).",
    );
    for (reason, value) in DropReason::ALL.iter().zip(by_reason) {
        doc.sample(name, &[("reason", reason.label())], *value);
    }
}

fn refusals(doc: &mut Exposition, metrics: &Metrics) {
    let name = "ringmq_connects_refused_total";
    doc.family(
        name,
        Kind::Counter,
        "Connections refused before login, by reason: at accept (max_connections) or by the \
         CONNACK's reason code.",
    );
    for refusal in Refusal::ALL {
        let value = sum(metrics, |shard| {
            metrics.detail(shard).refused[refusal.index()].load(Ordering::Relaxed)
        });
        doc.sample(name, &[("reason", refusal.label())], value);
    }
}

fn queues(doc: &mut Exposition, state: &OpsState, metrics: &Metrics) {
    let inflight = sum(metrics, |shard| {
        metrics.detail(shard).inflight.load(Ordering::Relaxed)
    });
    let queued = sum(metrics, |shard| {
        metrics.detail(shard).queued.load(Ordering::Relaxed)
    });
    let help_inflight =
        "QoS 1/2 copies sent and not yet acknowledged (refreshed on the gauge tick).";
    doc.single(
        "ringmq_inflight_messages",
        Kind::Gauge,
        help_inflight,
        inflight,
    );
    let help_queued = "Copies queued in memory for sessions (refreshed on the gauge tick).";
    doc.single("ringmq_queued_messages", Kind::Gauge, help_queued, queued);
    let bytes = state.shared.limits.queues.budget.used();
    doc.single(
        "ringmq_queued_bytes",
        Kind::Gauge,
        "Bytes of queued copies, all sessions (against queues.max_total_queued_bytes).",
        bytes,
    );
    doc.single(
        "ringmq_outbound_bytes",
        Kind::Gauge,
        "Bytes in send queues, all connections, as of each shard's last turn (against \
         queues.max_total_outbound_bytes).",
        state.shared.limits.outbound.used(),
    );
}

fn shards(doc: &mut Exposition, state: &OpsState, metrics: &Metrics) {
    let ended = state.ended_shards();
    let shards = PerShard::new(metrics.shard_count());
    shards.family(
        doc,
        ("ringmq_shard_up", Kind::Gauge),
        "1 while the shard's thread runs, 0 once it ended.",
        |shard| u64::from(!ended.contains(&shard)),
    );
    shards.family(
        doc,
        ("ringmq_shard_turns_total", Kind::Counter),
        "Loop turns of the shard.",
        |shard| metrics.detail(shard).turns.load(Ordering::Relaxed),
    );
    shards.family(
        doc,
        ("ringmq_shard_busy_seconds_total", Kind::Counter),
        "Seconds the shard spent working rather than waiting for events.",
        |shard| metrics.detail(shard).busy_ns.load(Ordering::Relaxed) as f64 / 1e9,
    );
    shards.family(
        doc,
        ("ringmq_shard_replica_subscriptions", Kind::Gauge),
        "Subscriptions in the shard's replica of the table.",
        |shard| {
            let counters = metrics.shard(shard);
            counters.replica_subscriptions.load(Ordering::Relaxed)
        },
    );
    let name = "ringmq_delivery_latency_seconds";
    doc.family(
        name,
        Kind::Histogram,
        "In-broker delivery latency: from the loop turn a PUBLISH was received to the turn its \
         copy was queued on the subscriber's connection, by the delivering shard (turn clock; \
         first sends of live copies only).",
    );
    for (shard, label) in shards.labels.iter().enumerate() {
        let snapshot: HistogramSnapshot = metrics.detail(shard).delivery_latency.snapshot();
        doc.histogram(name, &[("shard", label.as_str())], buckets(&snapshot));
    }
}

/// The `shard` label values.
struct PerShard {
    labels: Vec<String>,
}

impl PerShard {
    fn new(count: usize) -> Self {
        Self {
            labels: (0..count).map(|shard| shard.to_string()).collect(),
        }
    }

    /// A family with one sample per shard.
    fn family<V: std::fmt::Display>(
        &self,
        doc: &mut Exposition,
        (name, kind): (&str, Kind),
        help: &str,
        value: impl Fn(usize) -> V,
    ) {
        doc.family(name, kind, help);
        for (shard, label) in self.labels.iter().enumerate() {
            doc.sample(name, &[("shard", label.as_str())], value(shard));
        }
    }
}

fn auth(doc: &mut Exposition, state: &OpsState) {
    let Some(gatekeeper) = &state.shared.access.gatekeeper else {
        return;
    };
    let figures = gatekeeper.figures();
    let gauges = [
        (
            "ringmq_auth_pending",
            "Logins and topic checks queued for or being asked of the authentication backends.",
            figures.pending,
        ),
        (
            "ringmq_auth_cached_logins",
            "Login answers cached.",
            figures.cached_logins,
        ),
        (
            "ringmq_auth_cached_topics",
            "Topic-check answers cached.",
            figures.cached_topics,
        ),
    ];
    for (name, help, value) in gauges {
        doc.single(name, Kind::Gauge, help, value);
    }
    let help = "Backend questions that failed (down, timed out, bad answer).";
    doc.single(
        "ringmq_auth_backend_failures_total",
        Kind::Counter,
        help,
        figures.backend_failures,
    );
}

/// Each `[[bridges]]` entry's figures, labelled `bridge="<name>"` (nothing without bridges).
fn bridges(doc: &mut Exposition, state: &OpsState) {
    let stats = state.shared.links.bridges.stats();
    if stats.is_empty() {
        return;
    }
    type Figure = fn(&broker_api::BridgeStats) -> u64;
    let families: [(&str, Kind, &str, Figure); 5] = [
        (
            "ringmq_bridge_connected",
            Kind::Gauge,
            "1 while both the bridge's connections (remote and local) are up and subscribed.",
            |s| u64::from(s.connected),
        ),
        (
            "ringmq_bridge_messages_in_total",
            Kind::Counter,
            "Messages brought in from the remote broker and accepted here.",
            |s| s.messages_in,
        ),
        (
            "ringmq_bridge_messages_out_total",
            Kind::Counter,
            "Messages sent to the remote broker (QoS 1/2: acknowledged by it).",
            |s| s.messages_out,
        ),
        (
            "ringmq_bridge_dropped_total",
            Kind::Counter,
            "Messages the bridge gave up on (no rule maps the topic, or the destination refused them).",
            |s| s.dropped,
        ),
        (
            "ringmq_bridge_reconnects_total",
            Kind::Counter,
            "Connection attempts after the first.",
            |s| s.reconnects,
        ),
    ];
    for (name, kind, help, figure) in families {
        doc.family(name, kind, help);
        for stat in &stats {
            doc.sample(name, &[("bridge", stat.name.as_str())], figure(stat));
        }
    }
}

fn store(doc: &mut Exposition, state: &OpsState) {
    let Some(store) = &state.shared.persistence.store else {
        return;
    };
    let commits = store.commits.load(Ordering::Relaxed);
    doc.single(
        "ringmq_store_commits_total",
        Kind::Counter,
        "Group commits of the persistent store.",
        commits,
    );
    let skipped = store.skipped_writes.load(Ordering::Relaxed);
    doc.single("ringmq_store_skipped_writes_total", Kind::Counter, "Stored writes the engine skipped as not following the stored state (0 unless something is wrong).", skipped);
    doc.single(
        "ringmq_store_size_bytes",
        Kind::Gauge,
        "Bytes the store's files take in persistence.dir (read at each scrape).",
        directory_bytes(&state.shared.config.persistence.dir),
    );
    let name = "ringmq_store_commit_duration_seconds";
    doc.family(name, Kind::Histogram, "Time of one group commit (the engine's commit call, sync included with persistence.sync = \"batch\").");
    doc.histogram(name, &[], buckets(&store.commit_latency.snapshot()));
}

/// The size of the files under `dir` (one level of subdirectories, as the engines keep them);
/// what cannot be read counts 0.
fn directory_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            Some(if meta.is_dir() {
                std::fs::read_dir(entry.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|inner| inner.metadata().ok())
                    .filter(std::fs::Metadata::is_file)
                    .map(|m| m.len())
                    .sum()
            } else {
                meta.len()
            })
        })
        .sum()
}

/// The sum over shards of `value(shard)`.
fn sum(metrics: &Metrics, value: impl Fn(usize) -> u64) -> u64 {
    (0..metrics.shard_count()).map(value).sum()
}

/// A latency histogram's snapshot as the exposition writes it.
fn buckets(snapshot: &HistogramSnapshot) -> Buckets<'_> {
    Buckets {
        bounds: &crate::metrics::histogram::BOUNDS,
        counts: &snapshot.buckets,
        sum: std::time::Duration::from_nanos(snapshot.sum_ns),
    }
}
