//! Which answer a request gets: `/healthz` and `/readyz` (open to all: they tell only whether
//! the broker runs), `/metrics` and `/api/...` (behind the configured credentials; a request
//! that changes something may carry no other body type than JSON), `/api/v1/history` (the
//! listener's own, `history.rs`) and the dashboard's files (`dashboard.rs`). `guard.rs` has
//! refused foreign hosts and origins before.

use super::credentials::Credentials;
use super::dashboard;
use super::history::History;
use super::port::{AdminRequest, OpsPort};
use super::request::Request;
use super::response::{JSON, PROMETHEUS, Response};
use super::target::Target;

/// The methods the built-in endpoints answer.
const READ_ONLY: &str = "GET, HEAD";

/// What the routes answer from.
pub struct Routes<'a> {
    pub port: &'a dyn OpsPort,
    pub credentials: &'a Credentials,
    pub history: &'a History,
}

/// The response to `request`.
pub fn route(routes: &Routes<'_>, request: &Request) -> Response {
    let Ok(target) = Target::parse(&request.target) else {
        return Response::error(400);
    };
    let (port, credentials) = (routes.port, routes.credentials);
    let path = target.path.as_str();
    let page = dashboard::file(path);
    let protected = path == "/metrics"
        || path.starts_with("/api/")
        || (page.is_some() && !credentials.page_open());
    if protected && !credentials.admits(request.header("authorization")) {
        let mut refused = Response::error(401);
        refused.headers = credentials.challenges();
        return refused;
    }
    let read_only = matches!(request.method.as_str(), "GET" | "HEAD");
    match path {
        "/healthz" | "/readyz" | "/metrics" | HISTORY if !read_only => {
            Response::method_not_allowed(READ_ONLY)
        }
        "/healthz" => health(port),
        "/readyz" => readiness(port),
        "/metrics" => metrics(port),
        HISTORY => json(routes.history.json()),
        _ if path.starts_with("/api/") && !read_only && !is_json(request) => Response::text(
            415,
            "a request body must be JSON: send Content-Type: application/json\n",
        ),
        _ if path.starts_with("/api/") => admin(port, request, &target),
        _ => match page {
            Some(_) if !read_only => Response::method_not_allowed(READ_ONLY),
            Some(page) => page,
            None => Response::error(404),
        },
    }
}

/// The dashboard's history ring (`history.rs`).
const HISTORY: &str = "/api/v1/history";

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

fn json(body: String) -> Response {
    Response {
        status: 200,
        content_type: JSON,
        headers: Vec::new(),
        body: body.into_bytes(),
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
