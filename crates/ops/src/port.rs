//! [`OpsPort`]: what the operations listener asks of the broker it serves (the metrics
//! document, whether it is healthy and ready, the admin API's answers), and the admin API's
//! request and response as the listener hands them over. The listener knows nothing else of
//! the broker.

/// What the operations listener asks of the broker.
pub trait OpsPort: Send + Sync + 'static {
    /// The `/metrics` document (Prometheus text format 0.0.4).
    fn metrics(&self) -> String;

    /// The shards that have ended, by index (`/healthz` answers 503 naming them).
    fn ended_shards(&self) -> Vec<usize>;

    /// Why the broker is not ready for new connections (`/readyz` answers 503 with it);
    /// `None` when it is.
    fn not_ready(&self) -> Option<&'static str>;

    /// The admin API's answer to `request`; `None` for a path it does not know (404).
    fn admin(&self, request: &AdminRequest<'_>) -> Option<AdminResponse>;
}

/// One admin request, as the operations HTTP server parsed it.
#[derive(Debug, Clone, Copy)]
pub struct AdminRequest<'a> {
    /// `GET`, `POST`, `DELETE`...
    pub method: &'a str,
    /// The path, percent-decoded, without the query.
    pub path: &'a str,
    /// The query's key/value pairs, percent-decoded.
    pub query: &'a [(String, String)],
    /// The request body.
    pub body: &'a [u8],
}

impl AdminRequest<'_> {
    /// The value of query parameter `key`, if given.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// An admin answer: an HTTP status and a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminResponse {
    /// The HTTP status.
    pub status: u16,
    /// JSON.
    pub body: String,
}

impl AdminResponse {
    /// 200 with `value` as JSON.
    pub fn ok(value: &impl serde::Serialize) -> Self {
        Self {
            status: 200,
            body: serde_json::to_string(value).unwrap_or_else(|_| "{}".into()),
        }
    }

    /// `status` with `{"error": message}`.
    pub fn error(status: u16, message: impl std::fmt::Display) -> Self {
        Self {
            status,
            body: serde_json::json!({ "error": message.to_string() }).to_string(),
        }
    }
}
