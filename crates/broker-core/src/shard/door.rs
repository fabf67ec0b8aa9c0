//! The `[ip]` guard at this shard's door: admission at accept, the count given back at close,
//! failed logins reported (they may ban the address).

use std::net::{IpAddr, SocketAddr};

use ring_runtime::ConnId;
use tracing::{debug, warn};

use super::{BrokerShard, Ctx};
use crate::guard::Admission;

impl BrokerShard {
    /// Whether the guard lets a connection from `peer` in (a refused one is aborted).
    pub(super) fn admit_address(&mut self, ctx: &mut Ctx, conn: ConnId, peer: SocketAddr) -> bool {
        let guard = &self.shared.door.guard;
        if !guard.is_active() {
            return true;
        }
        match guard.admit(peer.ip(), ctx.now()) {
            Ok(admission) => {
                self.door.admitted.insert(conn, (peer.ip(), admission));
                true
            }
            Err(refusal) => {
                debug!(%peer, %refusal, "connection refused at accept");
                ctx.abort(conn);
                false
            }
        }
    }

    /// `conn` closed: its address's connection count goes down.
    pub(super) fn address_released(&mut self, conn: ConnId) {
        if let Some((_, admission)) = self.door.admitted.remove(&conn) {
            self.shared.door.guard.release(admission);
        }
    }

    /// A CONNECT on `conn` was refused for its credentials.
    pub(super) fn login_failed(&mut self, ctx: &Ctx, conn: ConnId) {
        let Some(&(ip, _)): Option<&(IpAddr, Admission)> = self.door.admitted.get(&conn) else {
            return;
        };
        if self.shared.door.guard.login_failed(ip, ctx.now()) {
            warn!(%ip, "address banned after repeated failed logins (ip.ban_after_auth_failures)");
        }
    }
}
