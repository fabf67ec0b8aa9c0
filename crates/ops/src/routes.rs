//! Which answer a request gets: `/healthz` and `/readyz` (open to all: they tell only whether
//! the broker runs), `/metrics` and `/api/...` (behind the configured credentials; a body sent to
//! the admin API must be JSON). `guard.rs` has refused foreign hosts and origins before.

use super::credentials::Credentials;
use super::port::{AdminRequest, OpsPort};
use super::request::Request;
use super::response::{JSON, PROMETHEUS, Response};
use super::target::Target;

/// The methods the built-in endpoints answer.
const READ_ONLY: &str = "GET, HEAD";

/// The response to `request`.
pub fn route(port: &dyn OpsPort, credentials: &Credentials, request: &Request) -> Response {
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
        "/healthz" => health(port),
        "/readyz" => readiness(port),
        "/metrics" => metrics(port),
        _ if path.starts_with("/api/") && !read_only && !is_json(request) => Response::text(
            415,
            "a request body must be JSON: send Content-Type: application/json\n",
        ),
        _ if path.starts_with("/api/") => admin(port, request, &target),
        _ => Response::error(404),
    }
}

/// Whether `request` has no body and no `Content-Type`, or JSON (`Content-Type:
/// application/json`): a browser sends a JSON body to another origin only after a CORS
/// preflight, which this server never grants, and a form always sends a form type, even with
/// no field; so a cross-site page can send neither (the origin checks of `guard.rs` come
/// first).
fn is_json(request: &Request) -> bool {
    match request.header("content-type") {
        None => request.body.is_empty(),
        Some(value) => {
            let media_type = value.split(';').next().unwrap_or_default().trim();
            media_type.eq_ignore_ascii_case("application/json")
        }
    }
}

/// 200 while every shard runs.
fn health(port: &dyn OpsPort) -> Response {
    let ended = port.ended_shards();
    if ended.is_empty() {
        return Response::text(200, "ok\n");
    }
    Response::text(503, format!("shards ended: {ended:?}\n"))
}

/// 200 once the broker serves, while it is not shutting down, in overload mode, or missing a
/// shard.
fn readiness(port: &dyn OpsPort) -> Response {
    match port.not_ready() {
        Some(why) => Response::text(503, format!("{why}\n")),
        None => Response::text(200, "ready\n"),
    }
}

fn metrics(port: &dyn OpsPort) -> Response {
    let mut response = Response::text(200, port.metrics());
    response.content_type = PROMETHEUS;
    response
}

/// The admin API's answer; 404 for a path it does not know.
fn admin(port: &dyn OpsPort, request: &Request, target: &Target) -> Response {
    let admin_request = AdminRequest {
        method: &request.method,
        path: &target.path,
        query: &target.query,
        body: &request.body,
    };
    match port.admin(&admin_request) {
        Some(answer) => Response {
            status: answer.status,
            content_type: JSON,
            headers: Vec::new(),
            body: answer.body.into_bytes(),
        },
        None => Response::error(404),
    }
}
