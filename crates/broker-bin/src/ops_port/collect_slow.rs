//! The slow-subscriber families of `/metrics` (`[slow_subscribers]`, docs/operations.md): each
//! ranking's top N as of the shards' last gauge tick, labelled by rank and client id; a
//! bounded top-N, never a series per client.

use broker_core::slow::SlowReport;
use ops::exposition::{Exposition, Kind};

use super::state::OpsState;

/// The three rankings (nothing when `slow_subscribers.top` is 0).
pub(super) fn slow_subscribers(doc: &mut Exposition, state: &OpsState) {
    let top = state.shared.config.slow_subscribers.top;
    if top == 0 {
        return;
    }
    let metrics = &state.shared.metrics;
    let reports = (0..metrics.shard_count()).map(|shard| {
        let slot = metrics.detail(shard).slow.lock();
        slot.unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    });
    let merged = SlowReport::merge(reports.collect::<Vec<_>>(), top);
    let name = "ringmq_slow_subscriber_latency_seconds";
    doc.family(
        name,
        Kind::Gauge,
        "The slowest subscribers: their slowest delivery over slow_subscribers.threshold_ms \
         (PUBLISH arrival to PUBACK / PUBREC, or to the write for QoS 0), top N by rank.",
    );
    for (rank, row) in merged.by_latency.iter().enumerate() {
        let seconds = row.entry.max_latency_ns as f64 / 1e9;
        sample(doc, name, rank, &row.client_id, seconds);
    }
    let name = "ringmq_slow_subscriber_dropped";
    doc.family(
        name,
        Kind::Gauge,
        "The subscribers that lost the most messages to their queue's bound or a full send \
         queue while ranked, top N by rank.",
    );
    for (rank, row) in merged.by_drops.iter().enumerate() {
        sample(doc, name, rank, &row.client_id, row.entry.dropped);
    }
    let name = "ringmq_slow_subscriber_queued";
    doc.family(
        name,
        Kind::Gauge,
        "The subscribers with the deepest queues (memory and disk), top N by rank.",
    );
    for (rank, row) in merged.by_queue.iter().enumerate() {
        sample(doc, name, rank, &row.client_id, row.queued);
    }
}

fn sample(
    doc: &mut Exposition,
    name: &str,
    rank: usize,
    client_id: &str,
    value: impl std::fmt::Display,
) {
    let rank = (rank + 1).to_string();
    doc.sample(
        name,
        &[("rank", rank.as_str()), ("client_id", client_id)],
        value,
    );
}
