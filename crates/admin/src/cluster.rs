//! `GET /api/v1/cluster/nodes`: the cluster's live nodes, one row each, as the last
//! heartbeat round read them (the cluster crate's `totals.rs`); 404 on a single node.

use std::time::{SystemTime, UNIX_EPOCH};

use broker_api::ClusterNode;
use serde_json::{Value, json};

use super::{AdminPort, AdminResponse};

/// The node list as JSON, or 404 when the broker is not clustered.
pub(super) fn nodes(port: &AdminPort) -> Result<AdminResponse, AdminResponse> {
    let Some(link) = port.shared().links.cluster.as_ref() else {
        return Err(AdminResponse::error(
            404,
            "not clustered (no [cluster] section)",
        ));
    };
    let now = SystemTime::now();
    let rows: Vec<Value> = link.nodes().iter().map(|n| node(n, now)).collect();
    Ok(AdminResponse::ok(&json!({ "nodes": rows })))
}

fn node(node: &ClusterNode, now: SystemTime) -> Value {
    let since_epoch = node
        .heartbeat_at
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    // The record's time is the NATS server's clock: a server clock ahead of ours reads 0.
    let age = now.duration_since(node.heartbeat_at).unwrap_or_default();
    json!({
        "node_id": node.node_id,
        "run": node.run,
        "this_node": node.this_node,
        "clients": node.clients,
        "sessions": node.sessions,
        "subscriptions": node.subscriptions,
        "messages_received": node.received,
        "messages_sent": node.sent,
        "heartbeat_at": since_epoch.as_secs(),
        "heartbeat_age_ms": age.as_millis() as u64,
    })
}
