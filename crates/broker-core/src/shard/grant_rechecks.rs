//! [`GrantRechecks`]: the connected clients an external backend let in with a grant that a
//! reload may change, and the re-checks asked about them; `grant_recheck.rs` asks and applies.

use access::gatekeeper::grant::ClientGrant;
use std::collections::VecDeque;

use codec::MqttStr;
use ring_runtime::ConnId;

use super::FastMap;

/// A connected client whose grant came from an external backend and restricts it (its rules,
/// or topic answers) or makes it a superuser.
pub(super) struct BackendClient {
    /// The chain link that let it in: the one asked again.
    pub(super) link: usize,
    pub(super) username: Option<MqttStr>,
}

/// One re-check job out: whose, and which filters it asked about, in order.
pub(super) struct AskedRecheck {
    pub(super) conn: ConnId,
    pub(super) client_id: MqttStr,
    /// The grants epoch it was asked under: answers of an older one are ignored (the client
    /// is asked again for the newer one).
    pub(super) epoch: u64,
    pub(super) filters: Vec<MqttStr>,
}

/// The shard's re-checks of backend grants after reloads.
#[derive(Default)]
pub(super) struct GrantRechecks {
    pub(super) clients: FastMap<ConnId, BackendClient>,
    /// The grants epoch whose re-checks this shard has started.
    pub(super) seen_epoch: u64,
    /// Clients still to be asked about for `seen_epoch`.
    pub(super) queue: VecDeque<ConnId>,
    /// Jobs out, by token.
    pub(super) asked: FastMap<u64, AskedRecheck>,
    pub(super) next_token: u64,
    /// A retry is armed after the workers were busy.
    pub(super) retry_armed: bool,
}

impl GrantRechecks {
    /// The connection ended: it is not asked about any more (answers out are ignored).
    pub(super) fn recheck_closed(&mut self, conn: ConnId) {
        if !self.clients.is_empty() {
            self.clients.remove(&conn);
        }
    }

    /// The retry after a busy job queue is due.
    pub(super) fn recheck_retry_due(&mut self) {
        self.retry_armed = false;
    }

    /// `conn`'s client was admitted with `grant`: remembered for re-checks when an external
    /// backend gave it and a reload could change it.
    pub(super) fn track_backend_grant(
        &mut self,
        conn: ConnId,
        username: Option<&MqttStr>,
        grant: Option<&ClientGrant>,
    ) {
        let Some(link) = grant
            .filter(|g| g.may_change_on_reload())
            .and_then(|g| g.link)
        else {
            return;
        };
        let client = BackendClient {
            link,
            username: username.cloned(),
        };
        self.clients.insert(conn, client);
    }
}
