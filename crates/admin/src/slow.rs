//! `GET /api/v1/slow_subscribers`: every shard's slow-subscriber rankings merged
//! (`broker_core::slow`): by delivery latency, by messages dropped, by queue depth, each at
//! most `slow_subscribers.top`.

use broker_core::slow::{QueueRow, SlowReport, SlowRow, millis};
use serde_json::{Value, json};

use super::query::AdminQuery;
use super::{AdminPort, AdminResponse, NoAnswer};

/// The merged rankings as JSON.
pub(super) fn slow_subscribers(port: &AdminPort) -> Result<AdminResponse, NoAnswer> {
    let settings = &port.shared.config.slow_subscribers;
    let reports = port.ask_all(|reply| AdminQuery::SlowSubscribers { reply })?;
    let merged = SlowReport::merge(reports, settings.top);
    Ok(AdminResponse::ok(&json!({
        "threshold_ms": settings.threshold.as_millis() as u64,
        "top": settings.top,
        "by_latency": merged.by_latency.iter().map(slow_row).collect::<Vec<_>>(),
        "by_drops": merged.by_drops.iter().map(slow_row).collect::<Vec<_>>(),
        "by_queue": merged.by_queue.iter().map(queue_row).collect::<Vec<_>>(),
    })))
}

fn slow_row(row: &SlowRow) -> Value {
    json!({
        "client_id": row.client_id,
        "last_latency_ms": millis(row.entry.last_latency_ns),
        "max_latency_ms": millis(row.entry.max_latency_ns),
        "slow_deliveries": row.entry.slow_deliveries,
        "dropped": row.entry.dropped,
        "idle_seconds": row.idle_seconds,
    })
}

fn queue_row(row: &QueueRow) -> Value {
    json!({
        "client_id": row.client_id,
        "queued": row.queued,
        "inflight": row.inflight,
    })
}
