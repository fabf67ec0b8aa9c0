//! The admin API's answers as JSON: the shards answer in broker-core's plain records
//! (`admin_query`), which know nothing of serialisation; the field names here are the API's.

use serde_json::{Value, json};

use super::query::{ClientDetail, ClientInfo, DelayedInfo, RetainedInfo, SubscriptionInfo};

/// One client in a list.
pub(super) fn client(info: &ClientInfo) -> Value {
    json!({
        "client_id": info.client_id,
        "username": info.username,
        "connected": info.connected,
        "address": info.address,
        "protocol": info.protocol,
        "keep_alive": info.keep_alive,
        "subscriptions": info.subscriptions,
        "inflight": info.inflight,
        "queued": info.queued,
        "queued_on_disk": info.queued_on_disk,
        "connected_since": info.connected_since,
        "shard": info.shard,
    })
}

/// One client in detail: its list entry's fields, its session expiry and its subscriptions.
pub(super) fn client_detail(detail: &ClientDetail) -> Value {
    let mut value = client(&detail.info);
    if let Value::Object(fields) = &mut value {
        fields.insert("session_expiry".into(), json!(detail.session_expiry));
        let subscriptions: Vec<Value> = detail.subscription_list.iter().map(subscription).collect();
        fields.insert("subscription_list".into(), Value::Array(subscriptions));
    }
    value
}

/// One subscription.
pub(super) fn subscription(info: &SubscriptionInfo) -> Value {
    json!({
        "client_id": info.client_id,
        "filter": info.filter,
        "qos": info.qos,
        "no_local": info.no_local,
        "retain_as_published": info.retain_as_published,
        "retain_handling": info.retain_handling,
        "subscription_id": info.subscription_id,
    })
}

/// One retained message.
pub(super) fn retained(info: &RetainedInfo) -> Value {
    json!({
        "topic": info.topic,
        "qos": info.qos,
        "payload_bytes": info.payload_bytes,
    })
}

/// One pending delayed message.
pub(super) fn delayed(info: &DelayedInfo) -> Value {
    json!({
        "id": info.id,
        "topic": info.topic,
        "qos": info.qos,
        "retain": info.retain,
        "due_unix_ms": info.due_unix_ms,
        "payload_bytes": info.payload_bytes,
        "publisher": info.publisher,
    })
}
