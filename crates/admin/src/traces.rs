//! `/api/v1/traces`: live traces (`broker_core::trace`, docs/operations.md "Traces").
//!
//! | method and path | answer |
//! |---|---|
//! | `POST /api/v1/traces` | starts a trace of `{"client_id"}`, `{"username"}`, `{"topic"}` (a filter) or `{"address"}` (an address or CIDR), with `seconds` (default 60), `max_bytes` (default 1 MiB) and `payload_bytes` (leading payload bytes shown, default 0, at most 64): `{"id"}` |
//! | `GET /api/v1/traces` | every trace kept: `id`, `target`, `running`, `started_unix_ms`, `bytes`, `lines`, `dropped_lines` |
//! | `GET /api/v1/traces/{id}?after=N` | the trace and its log from byte `N` (the previous answer's `next`; the live view polls this) |
//! | `DELETE /api/v1/traces/{id}` | stops the trace and forgets its log |
//! | `POST /api/v1/traces/{id}/stop` | stops the trace, keeping its log |

use std::time::{Duration, Instant};

use broker_core::trace::{TraceSpec, TraceTarget, TraceView};
use router::TopicFilter;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{AdminPort, AdminRequest, AdminResponse};

type Answer = Result<AdminResponse, AdminResponse>;

/// The most leading payload bytes a line shows.
const MAX_PAYLOAD_BYTES: usize = 64;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    client_id: Option<String>,
    username: Option<String>,
    topic: Option<String>,
    address: Option<String>,
    #[serde(default = "default_seconds")]
    seconds: u64,
    #[serde(default = "default_max_bytes")]
    max_bytes: usize,
    #[serde(default)]
    payload_bytes: usize,
}

fn default_seconds() -> u64 {
    60
}

fn default_max_bytes() -> usize {
    1 << 20
}

/// The answer to a `/api/v1/traces...` request (`rest`: the path after `v1/`).
pub(super) fn route(port: &AdminPort, request: &AdminRequest<'_>, rest: &str) -> Answer {
    let traces = &port.shared.links.traces;
    let now = Instant::now();
    let tail = rest.strip_prefix("traces").unwrap_or(rest);
    match (request.method, tail) {
        ("POST", "") => start(port, request),
        ("GET", "") => Ok(AdminResponse::ok(&json!({
            "traces": traces.views(now).iter().map(view).collect::<Vec<_>>(),
        }))),
        (method, tail) => {
            let (id, action) = match tail.trim_start_matches('/').split_once('/') {
                Some((id, action)) => (id, Some(action)),
                None => (tail.trim_start_matches('/'), None),
            };
            let id: u64 = id
                .parse()
                .map_err(|_| AdminResponse::error(404, format!("no trace `{id}`")))?;
            match (method, action) {
                ("GET", None) => read(port, request, id),
                ("DELETE", None) => found(traces.delete(id, now), id, "deleted"),
                ("POST", Some("stop")) => found(traces.stop(id, now), id, "stopped"),
                _ => Err(AdminResponse::error(
                    405,
                    "method not allowed on this endpoint",
                )),
            }
        }
    }
}

fn found(done: bool, id: u64, what: &str) -> Answer {
    match done {
        true => Ok(AdminResponse::ok(&json!({ what: id }))),
        false => Err(AdminResponse::error(404, format!("no trace {id}"))),
    }
}

fn start(port: &AdminPort, request: &AdminRequest<'_>) -> Answer {
    let body: StartBody = serde_json::from_slice(request.body)
        .map_err(|e| AdminResponse::error(400, format!("body: {e}")))?;
    let target = target(port, &body)?;
    if body.payload_bytes > MAX_PAYLOAD_BYTES {
        return Err(AdminResponse::error(
            400,
            format!(
                "payload_bytes {}: at most {MAX_PAYLOAD_BYTES}",
                body.payload_bytes
            ),
        ));
    }
    if body.seconds == 0 || body.max_bytes == 0 {
        return Err(AdminResponse::error(
            400,
            "seconds and max_bytes must be above 0",
        ));
    }
    let spec = TraceSpec {
        target,
        duration: Duration::from_secs(body.seconds),
        max_bytes: body.max_bytes,
        payload_bytes: body.payload_bytes,
    };
    let id = (port.shared.links.traces)
        .start(spec, Instant::now())
        .map_err(|refused| AdminResponse::error(409, refused))?;
    Ok(AdminResponse::ok(&json!({ "id": id })))
}

/// Exactly one of the four targets.
fn target(port: &AdminPort, body: &StartBody) -> Result<TraceTarget, AdminResponse> {
    let given = [&body.client_id, &body.username, &body.topic, &body.address];
    if given.iter().filter(|t| t.is_some()).count() != 1 {
        return Err(AdminResponse::error(
            400,
            "give exactly one of client_id, username, topic, address",
        ));
    }
    let bad =
        |what: &str, e: &dyn std::fmt::Display| AdminResponse::error(400, format!("{what}: {e}"));
    if let Some(id) = &body.client_id {
        return Ok(TraceTarget::ClientId(id.clone()));
    }
    if let Some(user) = &body.username {
        return Ok(TraceTarget::Username(user.clone()));
    }
    if let Some(topic) = &body.topic {
        let filter =
            TopicFilter::new(topic, &port.shared.limits.topics).map_err(|e| bad("topic", &e))?;
        return Ok(TraceTarget::Topic(filter));
    }
    let address = body.address.as_deref().unwrap_or_default();
    let cidr = match address.parse() {
        Ok(cidr) => cidr,
        Err(_) => format!("{address}/{}", if address.contains(':') { 128 } else { 32 })
            .parse()
            .map_err(|e| bad("address", &e))?,
    };
    Ok(TraceTarget::Address(cidr))
}

fn read(port: &AdminPort, request: &AdminRequest<'_>, id: u64) -> Answer {
    let Some(trace) = port.shared.links.traces.get(id) else {
        return Err(AdminResponse::error(404, format!("no trace {id}")));
    };
    let after = match request.param("after") {
        None => 0,
        Some(text) => text
            .parse()
            .map_err(|_| AdminResponse::error(400, format!("after `{text}`: a byte offset")))?,
    };
    let (log, next) = trace.read(after);
    let mut answer = view(&trace.view(Instant::now()));
    if let Value::Object(fields) = &mut answer {
        fields.insert("log".into(), json!(log));
        fields.insert("next".into(), json!(next));
    }
    Ok(AdminResponse::ok(&answer))
}

fn view(view: &TraceView) -> Value {
    json!({
        "id": view.id,
        "target": view.target,
        "running": view.running,
        "started_unix_ms": view.started_unix_ms,
        "bytes": view.bytes,
        "lines": view.lines,
        "dropped_lines": view.dropped_lines,
    })
}
