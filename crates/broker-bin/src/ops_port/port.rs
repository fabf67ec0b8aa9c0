//! [`ops::OpsPort`] for [`OpsState`]: the metrics document, health, readiness and the admin
//! API's answers.

use super::collect;
use super::state::OpsState;

impl ops::OpsPort for OpsState {
    fn metrics(&self) -> String {
        collect::render(self)
    }

    fn ended_shards(&self) -> Vec<usize> {
        OpsState::ended_shards(self)
    }

    fn not_ready(&self) -> Option<&'static str> {
        if !self.lifecycle.serving() {
            return Some("not serving (starting or shutting down)");
        }
        if !OpsState::ended_shards(self).is_empty() {
            return Some("a shard has ended");
        }
        if self.overloaded() {
            return Some("overload mode: new connections are refused");
        }
        None
    }

    fn admin(&self, request: &ops::AdminRequest<'_>) -> Option<ops::AdminResponse> {
        self.admin.route(request)
    }
}
