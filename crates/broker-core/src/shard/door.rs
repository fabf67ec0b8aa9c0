//! The `[ip]` guard at this shard's door: admission at accept, the count given back at close,
//! failed logins reported (they may ban the address, or the username from it).

use std::net::SocketAddr;

use ring_runtime::ConnId;
use tracing::{debug, warn};

use super::Ctx;
use super::parts::Door;
use crate::guard::{BanRule, IpGuard};

impl Door {
    /// Whether the guard lets a connection from `peer` in (a refused one is aborted).
    pub(super) fn admit_address(
        &mut self,
        guard: &IpGuard,
        ctx: &mut Ctx,
        conn: ConnId,
        peer: SocketAddr,
    ) -> bool {
        if !guard.is_active() {
            return true;
        }
        match guard.admit(peer, ctx.now()) {
            Ok(admission) => {
                self.admitted.insert(conn, (peer, admission));
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
    pub(super) fn address_released(&mut self, guard: &IpGuard, conn: ConnId) {
        if let Some((_, admission)) = self.admitted.remove(&conn) {
            guard.release(admission);
        }
    }

    /// Whether `user` is barred from `conn`'s address after its failed logins.
    pub(super) fn user_banned(
        &self,
        guard: &IpGuard,
        ctx: &Ctx,
        conn: ConnId,
        user: Option<&str>,
    ) -> bool {
        self.admitted
            .get(&conn)
            .is_some_and(|&(peer, _)| guard.user_banned(peer, user, ctx.now()))
    }

    /// A CONNECT of `user` on `conn` was refused for its credentials.
    pub(super) fn login_failed(
        &self,
        guard: &IpGuard,
        ctx: &Ctx,
        conn: ConnId,
        user: Option<&str>,
    ) {
        let Some(&(peer, _)) = self.admitted.get(&conn) else {
            return;
        };
        let ip = peer.ip().to_canonical();
        match guard.login_failed(peer, user, ctx.now()) {
            Some(BanRule::Address) => warn!(
                %ip,
                rule = BanRule::Address.key(),
                "address banned after repeated failed logins"
            ),
            Some(BanRule::User) => warn!(
                %ip,
                user = user.unwrap_or(""),
                rule = BanRule::User.key(),
                "username barred from this address after repeated failed logins"
            ),
            None => {}
        }
    }
}
