//! The admin API (`/api/v1/...` on the operations HTTP listener, the `ops` crate's server):
//! clients, subscriptions, retained and delayed messages, traces, slow subscribers, the
//! cluster's nodes, publishing, the effective config and reload. Questions go to the shards
//! through their mailboxes ([`query::AdminQuery`]); no other thread touches their state. The
//! configuration's reload and view are the binary's, reached through [`LiveConfig`].
//! Lists are paginated with a cursor (`after`) and bounded (`limit`, at most [`MAX_LIMIT`]).

/// The questions the admin API asks the shards, and their answers (`broker_core`).
pub use broker_core::admin_query as query;
mod cluster;
mod json;
mod routes;
mod slow;
mod traces;

pub use ops::port::{AdminRequest, AdminResponse};

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use ring_runtime::{Poster, ShardId};

use broker_core::message::ShardMsg;
use broker_core::shared::Shared;
use query::AdminQuery;

/// The most items one page holds.
pub const MAX_LIMIT: usize = 1_000;
/// Items per page when the request does not say.
pub const DEFAULT_LIMIT: usize = 100;
/// How long a shard may take to answer.
const SHARD_TIMEOUT: Duration = Duration::from_secs(5);

/// What the operations HTTP server holds to answer admin requests.
#[derive(Clone)]
pub struct AdminPort {
    poster: Poster<ShardMsg>,
    shared: Arc<Shared>,
    /// What reloads and the configuration view need (`/api/v1/reload`, `/api/v1/config`).
    live: Arc<dyn LiveConfig>,
}

/// The configuration as the running broker holds it: what `/api/v1/reload` and
/// `/api/v1/config` answer with (the binary implements it over its reload state).
pub trait LiveConfig: Send + Sync {
    /// What SIGHUP does, with `shared` the running broker's state; logged by the
    /// implementation.
    fn reload(&self, shared: &Shared) -> Reloaded;

    /// The last configuration loaded and the keys of it waiting for a restart, as JSON.
    fn view(&self) -> serde_json::Value;
}

/// A reload's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Reloaded {
    /// Nothing refused and no error: the new configuration is in force (less the keys that
    /// wait for a restart).
    pub clean: bool,
    /// The reload's report, as JSON.
    pub report: serde_json::Value,
}

/// Why a shard gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoAnswer;

impl AdminPort {
    /// A port that asks the shards through `poster`.
    pub fn new(poster: Poster<ShardMsg>, shared: Arc<Shared>, live: Arc<dyn LiveConfig>) -> Self {
        Self {
            poster,
            shared,
            live,
        }
    }

    pub(crate) fn live(&self) -> &dyn LiveConfig {
        &*self.live
    }

    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Asks every shard; one answer each.
    pub(crate) fn ask_all<T: Send>(
        &self,
        make: impl Fn(Sender<T>) -> AdminQuery,
    ) -> Result<Vec<T>, NoAnswer> {
        let shards = self.poster.shard_count();
        let (reply, answers) = crossbeam_channel::bounded(shards);
        for index in 0..shards {
            let shard = ShardId::new(index as u16);
            let message = ShardMsg::Admin(make(reply.clone()));
            self.poster
                .post(shard, vec![message])
                .map_err(|_| NoAnswer)?;
        }
        drop(reply);
        (0..shards)
            .map(|_| answers.recv_timeout(SHARD_TIMEOUT).map_err(|_| NoAnswer))
            .collect()
    }

    /// Asks the shard that holds `client_id`'s session, if any.
    pub(crate) fn ask_owner<T: Send>(
        &self,
        client_id: &str,
        make: impl FnOnce(Sender<T>) -> AdminQuery,
    ) -> Result<Option<T>, NoAnswer> {
        let Some(shard) = self
            .shared
            .directory
            .sessions
            .get(client_id)
            .map(|l| l.shard)
        else {
            return Ok(None);
        };
        self.ask(shard, make).map(Some)
    }

    /// Asks one shard.
    pub(crate) fn ask<T: Send>(
        &self,
        shard: ShardId,
        make: impl FnOnce(Sender<T>) -> AdminQuery,
    ) -> Result<T, NoAnswer> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.poster
            .post(shard, vec![ShardMsg::Admin(make(reply))])
            .map_err(|_| NoAnswer)?;
        answer.recv_timeout(SHARD_TIMEOUT).map_err(|_| NoAnswer)
    }
}
