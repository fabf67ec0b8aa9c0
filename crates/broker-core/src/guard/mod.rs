//! Abuse defence at the door (`[ip]`): allow and deny lists of address blocks, a connection
//! limit and a connection rate limit per client address, and a temporary ban of an address
//! after repeated failed logins (per address, and per username from an address). Addresses in
//! `ip.exempt` and the broker's own links ([`OwnLinks`]: the bridges' local connections) are
//! neither limited nor banned. Shared by all shards; the per-address table is bounded.

mod mark;
mod rules;
mod table;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use broker_api::OwnLinks;
pub use mark::DoorMark;
pub use rules::{Admission, BanRule, IpSettings, Refusal};
use table::IpTable;
pub use transport::{Cidr, CidrError};

use crate::swap::Swap;

/// The door keeper, one per broker.
pub struct IpGuard {
    /// Swapped whole on reload; the table's counts, rates and bans carry over.
    settings: Swap<IpSettings>,
    table: IpTable,
    /// The broker's own connections to itself (registered by the bridges).
    own: Arc<OwnLinks>,
    /// Bans given (of an address or of a username from an address), for `/metrics`.
    bans: AtomicU64,
}

impl IpGuard {
    pub fn new(settings: IpSettings) -> Self {
        Self {
            settings: Swap::new(settings),
            table: IpTable::default(),
            own: Arc::new(OwnLinks::default()),
            bans: AtomicU64::new(0),
        }
    }

    /// Where the broker's own links register their source addresses (handed to the bridges).
    pub fn own_links(&self) -> &Arc<OwnLinks> {
        &self.own
    }

    /// Bans given so far (address and username bans).
    pub fn bans_total(&self) -> u64 {
        self.bans.load(Ordering::Relaxed)
    }

    /// Whether limits and bans skip `peer`: in `ip.exempt`, or one of the broker's own links.
    fn exempts(&self, settings: &IpSettings, peer: SocketAddr) -> bool {
        settings.exempts(peer.ip().to_canonical()) || self.own.contains(peer)
    }

    fn settings(&self) -> Arc<IpSettings> {
        self.settings.get()
    }

    /// New settings (a reload): later connections and logins are judged by them; open
    /// connections stay, and the counts, rates and bans recorded so far carry over.
    pub fn update(&self, settings: IpSettings) {
        self.settings.replace(settings);
    }

    /// Whether anything is configured at all (a broker without `[ip]` rules skips the guard).
    pub fn is_active(&self) -> bool {
        let settings = self.settings();
        !settings.allow.is_empty() || !settings.deny.is_empty() || settings.tracks()
    }

    /// A connection from `peer` arrived at `now`: admitted (counted) or refused.
    pub fn admit(&self, peer: SocketAddr, now: Instant) -> Result<Admission, Refusal> {
        let ip = peer.ip().to_canonical();
        let settings = &*self.settings();
        if settings.deny.iter().any(|block| block.contains(ip)) {
            return Err(Refusal::Denied);
        }
        if !settings.allow.is_empty() && !settings.allow.iter().any(|block| block.contains(ip)) {
            return Err(Refusal::NotAllowed);
        }
        if !settings.tracks() || self.exempts(settings, peer) {
            return Ok(None);
        }
        self.table.admit(ip, now, settings)
    }

    /// An admitted connection closed.
    pub fn release(&self, admission: Admission) {
        if let Some(ip) = admission {
            self.table.release(ip);
        }
    }

    /// Whether `user` is barred from the client's address `ip` (canonical) after its failed
    /// logins (a CONNECT refused without its password being checked). `peer`, the client's
    /// whole address, is asked for only when a ban is found (the broker's own links are exempt
    /// by address and port).
    pub fn user_banned(
        &self,
        ip: IpAddr,
        peer: impl FnOnce() -> SocketAddr,
        user: Option<&str>,
        now: Instant,
    ) -> bool {
        let settings = self.settings();
        settings.ban_user_after_auth_failures != 0
            && self.table.user_banned(ip, user, now)
            && !self.exempts(&settings, peer())
    }

    /// A login of `user` from `peer` failed at `now`; the ban it led to, if any.
    pub fn login_failed(
        &self,
        peer: SocketAddr,
        user: Option<&str>,
        now: Instant,
    ) -> Option<BanRule> {
        let settings = self.settings();
        if settings.ban_after_auth_failures == 0 && settings.ban_user_after_auth_failures == 0 {
            return None;
        }
        if self.exempts(&settings, peer) {
            return None;
        }
        let banned = self
            .table
            .login_failed(peer.ip().to_canonical(), user, now, &settings);
        if banned.is_some() {
            self.bans.fetch_add(1, Ordering::Relaxed);
        }
        banned
    }
}
