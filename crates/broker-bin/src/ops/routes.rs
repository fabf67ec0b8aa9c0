//! Which answer a request gets: `/healthz` and `/readyz` (open to all: they tell only whether
//! the broker runs), `/metrics` and `/api/...` (behind the configured credentials; a body sent to
//! the admin API must be JSON). `guard.rs` has refused foreign hosts and origins before.

use super::collect;
use super::credentials::Credentials;
use super::request::Request;
use super::response::{JSON, PROMETHEUS, Response};
use super::state::OpsState;
use super::target::Target;
use crate::admin::AdminRequest;

/// The methods the built-in endpoints answer.
const READ_ONLY: &str = "GET, HEAD";

/// The response to `request`.
pub fn route(state: &OpsState, credentials: &Credentials, request: &Request) -> Response {
    let Ok(target) = Target::parse(&request.target) else {
        return Response::error(400);
    };
    let path = target.path.as_str();
    let protected = path == "/metrics" || path.starts_with("/api/");
    if protected && !credentials.admits(request.header("authorization")) {
        let mut refused = Response::error(401);
        refused.headers = credentials.challenges();
        return refused;
    }
    let read_only = matches!(request.method.as_str(), "GET" | "HEAD");
    match path {
        "/healthz" | "/readyz" | "/metrics" if !read_only => {
            Response::method_not_allowed(READ_ONLY)
        }
        "/healthz" => health(state),
        "/readyz" => readiness(state),
        "/metrics" => metrics(state),
        _ if path.starts_with("/api/") && !read_only && !is_json(request) => Response::text(
            415,
            "a request body must be JSON: send Content-Type: application/json\n",
        ),
        _ if path.starts_with("/api/") => admin(state, request, &target),
        _ => Response::error(404),
    }
}

/// Whether `request` has no body, or a JSON one (`Content-Type: application/json`): a browser
/// sends a JSON body to another origin only after a CORS preflight, which this server never
/// grants, so a cross-site page cannot post one (the origin checks of `guard.rs` come first).
fn is_json(request: &Request) -> bool {
    if request.body.is_empty() {
        return true;
    }
    request.header("content-type").is_some_and(|value| {
        let media_type = value.split(';').next().unwrap_or_default().trim();
        media_type.eq_ignore_ascii_case("application/json")
    })
}

/// 200 while every shard runs.
fn health(state: &OpsState) -> Response {
    let ended = state.ended_shards();
    if ended.is_empty() {
        return Response::text(200, "ok\n");
    }
    Response::text(503, format!("shards ended: {ended:?}\n"))
}

/// 200 once the broker serves, while it is not shutting down, in overload mode, or missing a
/// shard.
fn readiness(state: &OpsState) -> Response {
    if !state.lifecycle.serving() {
        return Response::text(503, "not serving (starting or shutting down)\n");
    }
    if !state.ended_shards().is_empty() {
        return Response::text(503, "a shard has ended\n");
    }
    if state.overloaded() {
        return Response::text(503, "overload mode: new connections are refused\n");
    }
    Response::text(200, "ready\n")
}

fn metrics(state: &OpsState) -> Response {
    let mut response = Response::text(200, collect::render(state));
    response.content_type = PROMETHEUS;
    response
}

/// The admin API's answer; 404 for a path it does not know.
fn admin(state: &OpsState, request: &Request, target: &Target) -> Response {
    let admin_request = AdminRequest {
        method: &request.method,
        path: &target.path,
        query: &target.query,
        body: &request.body,
    };
    match state.admin.route(&admin_request) {
        Some(answer) => Response {
            status: answer.status,
            content_type: JSON,
            headers: Vec::new(),
            body: answer.body.into_bytes(),
        },
        None => Response::error(404),
    }
}
