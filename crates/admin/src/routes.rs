//! `/api/v1/...`: which request does what.
//!
//! | method and path | answer |
//! |---|---|
//! | `GET /api/v1/clients?after=&limit=&search=` | sessions by client id (connected or not), a page; with `search`, those whose client id, address or username contains it |
//! | `GET /api/v1/clients/{client_id}` | one session, with its subscriptions |
//! | `DELETE /api/v1/clients/{client_id}?reason=0x98` | disconnects it (5.0: DISCONNECT with the reason) |
//! | `GET /api/v1/subscriptions?after_client=&after_filter=&limit=` | subscriptions, a page |
//! | `GET /api/v1/retained?after=&limit=` | retained messages by topic, a page |
//! | `DELETE /api/v1/retained/{topic}` | clears the topic's retained message |
//! | `GET /api/v1/delayed?after=&limit=` | pending delayed messages (`$delayed/`) by id, a page |
//! | `DELETE /api/v1/delayed/{id}` | cancels a pending delayed message |
//! | `... /api/v1/traces...` | live traces: start, list, read, stop, delete (`traces.rs`) |
//! | `GET /api/v1/cluster/nodes` | the cluster's live nodes and each one's figures, from their heartbeats (`cluster.rs`; 404 on a single node) |
//! | `GET /api/v1/slow_subscribers` | the slowest subscribers: by delivery latency, by drops, by queue depth (`slow.rs`) |
//! | `POST /api/v1/publish` | publishes `{"topic", "payload" or "payload_base64", "qos", "retain"}` (`Content-Type: application/json`, checked by the `ops` crate's `routes.rs`) |
//! | `GET /api/v1/config` | the last configuration loaded, as TOML, and its keys waiting for a restart |
//! | `POST /api/v1/reload` | what SIGHUP does, answered with its report |

use base64::Engine;
use bytes::Bytes;
use codec::{PacketType, QoS, ReasonCode};
use serde::Deserialize;

use super::json;
use super::query::AdminQuery;
use super::{AdminPort, AdminRequest, AdminResponse, DEFAULT_LIMIT, MAX_LIMIT, NoAnswer};

impl AdminPort {
    /// The answer to `request`, or `None` when its path is not the admin API's.
    pub fn route(&self, request: &AdminRequest<'_>) -> Option<AdminResponse> {
        route(self, request)
    }
}

fn route(port: &AdminPort, request: &AdminRequest<'_>) -> Option<AdminResponse> {
    let rest = request.path.strip_prefix("/api/")?;
    let Some(rest) = rest.strip_prefix("v1/") else {
        return Some(AdminResponse::error(
            404,
            "unknown API version (expected /api/v1/)",
        ));
    };
    let answer = match (request.method, rest) {
        ("GET", "clients") => clients(port, request),
        (method, path) if path.starts_with("clients/") => {
            let client_id = &path["clients/".len()..];
            match method {
                "GET" => client(port, client_id),
                "DELETE" => disconnect(port, client_id, request),
                _ => Err(method_not_allowed()),
            }
        }
        ("GET", "subscriptions") => subscriptions(port, request),
        ("GET", "retained") => retained(port, request),
        ("DELETE", path) if path.starts_with("retained/") => {
            clear_retained(port, &path["retained/".len()..])
        }
        ("GET", "delayed") => delayed(port, request),
        ("DELETE", path) if path.starts_with("delayed/") => {
            cancel_delayed(port, &path["delayed/".len()..])
        }
        ("POST", "publish") => publish(port, request),
        (_, path) if path == "traces" || path.starts_with("traces/") => {
            super::traces::route(port, request, path)
        }
        ("GET", "slow_subscribers") => super::slow::slow_subscribers(port).map_err(unavailable),
        ("GET", "cluster/nodes") => super::cluster::nodes(port),
        ("POST", "reload") => Ok(reload(port)),
        ("GET", "config") => Ok(config(port)),
        (
            _,
            "clients" | "subscriptions" | "retained" | "delayed" | "publish" | "reload" | "config"
            | "slow_subscribers" | "cluster/nodes",
        ) => Err(method_not_allowed()),
        (_, path) if path.starts_with("retained/") || path.starts_with("delayed/") => {
            Err(method_not_allowed())
        }
        _ => Err(AdminResponse::error(
            404,
            format!("no such endpoint: {}", request.path),
        )),
    };
    Some(answer.unwrap_or_else(|error| error))
}

type Answer = Result<AdminResponse, AdminResponse>;

fn method_not_allowed() -> AdminResponse {
    AdminResponse::error(405, "method not allowed on this endpoint")
}

fn unavailable(_: NoAnswer) -> AdminResponse {
    AdminResponse::error(503, "a shard did not answer in time; try again")
}

/// `limit`: 1 to [`MAX_LIMIT`], [`DEFAULT_LIMIT`] when absent.
fn limit(request: &AdminRequest<'_>) -> Result<usize, AdminResponse> {
    let Some(text) = request.param("limit") else {
        return Ok(DEFAULT_LIMIT);
    };
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(AdminResponse::error(
            400,
            format!("limit `{text}`: expected 1 to {MAX_LIMIT}"),
        )),
    }
}

/// The first `limit` of every shard's page, and the cursor for the next page when it is full.
fn merged<T, K: Ord + Clone>(
    pages: Vec<Vec<T>>,
    limit: usize,
    key: impl Fn(&T) -> K,
) -> (Vec<T>, Option<K>) {
    let mut all: Vec<T> = pages.into_iter().flatten().collect();
    all.sort_by_key(|item| key(item));
    all.truncate(limit);
    let next = (all.len() == limit).then(|| all.last().map(&key)).flatten();
    (all, next)
}

fn clients(port: &AdminPort, request: &AdminRequest<'_>) -> Answer {
    let limit = limit(request)?;
    let after = request.param("after").map(str::to_owned);
    let search = request.param("search").filter(|text| !text.is_empty());
    let pages = port
        .ask_all(|reply| AdminQuery::Clients {
            after: after.clone(),
            limit,
            search: search.map(str::to_owned),
            reply,
        })
        .map_err(unavailable)?;
    let (clients, next) = merged(pages, limit, |c| c.client_id.clone());
    Ok(AdminResponse::ok(&serde_json::json!({
        "clients": clients.iter().map(json::client).collect::<Vec<_>>(),
        "next": next,
    })))
}

fn client(port: &AdminPort, client_id: &str) -> Answer {
    let detail = port
        .ask_owner(client_id, |reply| AdminQuery::Client {
            client_id: client_id.to_owned(),
            reply,
        })
        .map_err(unavailable)?
        .flatten();
    match detail {
        Some(detail) => Ok(AdminResponse::ok(&json::client_detail(&detail))),
        None => Err(AdminResponse::error(
            404,
            format!("no session for client `{client_id}`"),
        )),
    }
}

fn disconnect(port: &AdminPort, client_id: &str, request: &AdminRequest<'_>) -> Answer {
    let reason = match request.param("reason") {
        None => ReasonCode::AdministrativeAction,
        Some(text) => disconnect_reason(text)?,
    };
    let done = port
        .ask_owner(client_id, |reply| AdminQuery::Disconnect {
            client_id: client_id.to_owned(),
            reason,
            reply,
        })
        .map_err(unavailable)?;
    match done {
        Some(true) => Ok(AdminResponse::ok(&serde_json::json!({
            "disconnected": client_id,
            "reason": reason.name(),
        }))),
        _ => Err(AdminResponse::error(
            404,
            format!("client `{client_id}` is not connected"),
        )),
    }
}

/// A DISCONNECT reason code, as `0x98` or `152`.
fn disconnect_reason(text: &str) -> Result<ReasonCode, AdminResponse> {
    let value = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u8::from_str_radix(hex, 16).ok(),
        None => text.parse::<u8>().ok(),
    };
    value
        .and_then(ReasonCode::from_u8)
        .filter(|code| code.is_allowed_in(PacketType::Disconnect))
        .ok_or_else(|| {
            AdminResponse::error(
                400,
                format!("reason `{text}` is not a DISCONNECT reason code"),
            )
        })
}

fn subscriptions(port: &AdminPort, request: &AdminRequest<'_>) -> Answer {
    let limit = limit(request)?;
    let after = match (request.param("after_client"), request.param("after_filter")) {
        (Some(client), filter) => Some((client.to_owned(), filter.unwrap_or("").to_owned())),
        (None, _) => None,
    };
    let pages = port
        .ask_all(|reply| AdminQuery::Subscriptions {
            after: after.clone(),
            limit,
            reply,
        })
        .map_err(unavailable)?;
    let (subscriptions, next) = merged(pages, limit, |s| (s.client_id.clone(), s.filter.clone()));
    let next = next.map(|(client_id, filter)| serde_json::json!({"after_client": client_id, "after_filter": filter}));
    Ok(AdminResponse::ok(&serde_json::json!({
        "subscriptions": subscriptions.iter().map(json::subscription).collect::<Vec<_>>(),
        "next": next,
    })))
}

fn retained(port: &AdminPort, request: &AdminRequest<'_>) -> Answer {
    let limit = limit(request)?;
    let after = request.param("after").map(str::to_owned);
    // Every shard's replica holds every retained message: one shard answers.
    let page = port
        .ask(ring_runtime::ShardId::new(0), |reply| {
            AdminQuery::Retained {
                after,
                limit,
                reply,
            }
        })
        .map_err(unavailable)?;
    let (retained, next) = merged(vec![page], limit, |r| r.topic.clone());
    Ok(AdminResponse::ok(&serde_json::json!({
        "retained": retained.iter().map(json::retained).collect::<Vec<_>>(),
        "next": next,
    })))
}

fn clear_retained(port: &AdminPort, topic: &str) -> Answer {
    send_publish(port, topic.to_owned(), Bytes::new(), QoS::AtMostOnce, true)?;
    Ok(AdminResponse::ok(&serde_json::json!({ "cleared": topic })))
}

fn delayed(port: &AdminPort, request: &AdminRequest<'_>) -> Answer {
    let limit = limit(request)?;
    let after = match request.param("after") {
        None => None,
        Some(text) => Some(delayed_id(text)?),
    };
    let pages = port
        .ask_all(|reply| AdminQuery::Delayed {
            after,
            limit,
            reply,
        })
        .map_err(unavailable)?;
    let (delayed, next) = merged(pages, limit, |d| d.id);
    Ok(AdminResponse::ok(&serde_json::json!({
        "delayed": delayed.iter().map(json::delayed).collect::<Vec<_>>(),
        "next": next,
    })))
}

fn cancel_delayed(port: &AdminPort, text: &str) -> Answer {
    let id = delayed_id(text)?;
    let held = port
        .ask_all(|reply| AdminQuery::CancelDelayed { id, reply })
        .map_err(unavailable)?;
    match held.contains(&true) {
        true => Ok(AdminResponse::ok(&serde_json::json!({ "cancelled": id }))),
        false => Err(AdminResponse::error(
            404,
            format!("no pending delayed message {id}"),
        )),
    }
}

fn delayed_id(text: &str) -> Result<u64, AdminResponse> {
    text.parse::<u64>().map_err(|_| {
        AdminResponse::error(400, format!("id `{text}`: expected a delayed message id"))
    })
}

/// `POST /api/v1/publish`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PublishBody {
    topic: String,
    payload: Option<String>,
    payload_base64: Option<String>,
    #[serde(default)]
    qos: u8,
    #[serde(default)]
    retain: bool,
}

fn publish(port: &AdminPort, request: &AdminRequest<'_>) -> Answer {
    let body: PublishBody = serde_json::from_slice(request.body)
        .map_err(|e| AdminResponse::error(400, format!("body: {e}")))?;
    let payload = match (body.payload, body.payload_base64) {
        (Some(text), None) => Bytes::from(text),
        (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map(Bytes::from)
            .map_err(|e| AdminResponse::error(400, format!("payload_base64: {e}")))?,
        (None, None) => Bytes::new(),
        (Some(_), Some(_)) => {
            return Err(AdminResponse::error(
                400,
                "give payload or payload_base64, not both",
            ));
        }
    };
    let qos = QoS::from_u8(body.qos).ok_or_else(|| {
        AdminResponse::error(400, format!("qos {}: expected 0, 1 or 2", body.qos))
    })?;
    send_publish(port, body.topic.clone(), payload, qos, body.retain)?;
    Ok(AdminResponse::ok(
        &serde_json::json!({ "published": body.topic }),
    ))
}

fn send_publish(
    port: &AdminPort,
    topic: String,
    payload: Bytes,
    qos: QoS,
    retain: bool,
) -> Result<(), AdminResponse> {
    let outcome = port
        .ask(ring_runtime::ShardId::new(0), |reply| AdminQuery::Publish {
            topic,
            payload,
            qos,
            retain,
            reply,
        })
        .map_err(unavailable)?;
    outcome.map_err(|problem| AdminResponse::error(400, problem))
}

/// What SIGHUP does, answered with the report (200 when everything was applied or reported,
/// 400 when the configuration was refused or a file failed to load).
fn reload(port: &AdminPort) -> AdminResponse {
    let reloaded = port.live().reload(port.shared());
    AdminResponse {
        status: if reloaded.clean { 200 } else { 400 },
        ..AdminResponse::ok(&reloaded.report)
    }
}

/// The last configuration loaded, as TOML, and its keys that wait for a restart.
fn config(port: &AdminPort) -> AdminResponse {
    AdminResponse::ok(&port.live().view())
}
