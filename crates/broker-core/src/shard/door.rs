//! The `[ip]` guard at this shard's door: admission at accept (the connection keeps the mark it
//! was given), the count given back at close, failed logins reported (they may ban the address,
//! or the username from it).

use std::net::{IpAddr, SocketAddr};

use ring_runtime::ConnId;
use tracing::{debug, warn};

use super::parts::Door;
use super::{BrokerShard, Ctx};
use crate::guard::{BanRule, DoorMark, IpGuard};

impl Door {
    /// The guard's judgement of a connection from `peer`: the mark it keeps, or `None` when
    /// refused (the connection is aborted).
    pub(super) fn admit_address(
        &mut self,
        guard: &IpGuard,
        ctx: &mut Ctx,
        conn: ConnId,
        peer: SocketAddr,
    ) -> Option<DoorMark> {
        if !guard.is_active() {
            return Some(DoorMark::Unmarked);
        }
        match guard.admit(peer, ctx.now()) {
            Ok(admission) => {
                let ip = peer.ip().to_canonical();
                if let IpAddr::V6(v6) = ip {
                    self.v6_clients.insert(conn, v6);
                }
                Some(DoorMark::of(ip, admission.is_some()))
            }
            Err(refusal) => {
                debug!(%peer, %refusal, "connection refused at accept");
                ctx.abort(conn);
                None
            }
        }
    }

    /// The client address `conn`'s mark names (canonical).
    fn marked_ip(&self, conn: ConnId, mark: DoorMark) -> Option<IpAddr> {
        match mark {
            DoorMark::Unmarked => None,
            DoorMark::V4 { ip, .. } => Some(IpAddr::V4(ip)),
            DoorMark::V6 { .. } => self.v6_clients.get(&conn).map(|&ip| IpAddr::V6(ip)),
        }
    }

    /// `conn`, admitted with `mark`, closed (or was refused later at accept): its address's
    /// connection count goes down.
    pub(super) fn address_released(&mut self, guard: &IpGuard, conn: ConnId, mark: DoorMark) {
        let ip = self.marked_ip(conn, mark);
        if matches!(mark, DoorMark::V6 { .. }) {
            self.v6_clients.remove(&conn);
        }
        if mark.counted() {
            guard.release(ip);
        }
    }

    /// Whether `user` is barred from `conn`'s address after its failed logins.
    fn user_banned(
        &self,
        guard: &IpGuard,
        ctx: &Ctx,
        (conn, mark): (ConnId, DoorMark),
        user: Option<&str>,
    ) -> bool {
        self.marked_ip(conn, mark).is_some_and(|ip| {
            let peer = || client_address(ctx, conn, ip);
            guard.user_banned(ip, peer, user, ctx.now())
        })
    }

    /// A CONNECT of `user` on `conn` was refused for its credentials.
    fn login_failed(
        &self,
        guard: &IpGuard,
        ctx: &Ctx,
        (conn, mark): (ConnId, DoorMark),
        user: Option<&str>,
    ) {
        let Some(ip) = self.marked_ip(conn, mark) else {
            return;
        };
        match guard.login_failed(client_address(ctx, conn, ip), user, ctx.now()) {
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

/// `conn`'s client as its socket (or PROXY protocol header) names it; its admitted address
/// with port 0 should the socket no longer know its peer (reset by the client).
fn client_address(ctx: &Ctx, conn: ConnId, ip: IpAddr) -> SocketAddr {
    ctx.peer_addr(conn)
        .unwrap_or_else(|_| SocketAddr::new(ip, 0))
}

impl BrokerShard {
    /// The mark `conn` was admitted with.
    fn door_mark(&self, conn: ConnId) -> DoorMark {
        self.conns
            .get(&conn)
            .map_or(DoorMark::Unmarked, |c| c.door_mark())
    }

    /// Whether `user` is barred from `conn`'s address after its failed logins.
    pub(super) fn user_banned_here(&self, ctx: &Ctx, conn: ConnId, user: Option<&str>) -> bool {
        let at = (conn, self.door_mark(conn));
        (self.door).user_banned(&self.shared.door.guard, ctx, at, user)
    }

    /// A CONNECT of `user` on `conn` was refused for its credentials: counted against its
    /// address (and the username from it).
    pub(super) fn login_failed_here(&self, ctx: &Ctx, conn: ConnId, user: Option<&str>) {
        let at = (conn, self.door_mark(conn));
        (self.door).login_failed(&self.shared.door.guard, ctx, at, user);
    }
}
