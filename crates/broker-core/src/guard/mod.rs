//! Abuse defence at the door (`[ip]`): allow and deny lists of address blocks, a connection
//! limit and a connection rate limit per client address, and a temporary ban of an address
//! after repeated failed logins. Shared by all shards; the per-address table is bounded.

mod cidr;
mod rules;
mod table;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

pub use cidr::{Cidr, CidrError};
pub use rules::{Admission, IpSettings, Refusal};
use table::IpTable;

use crate::swap::Swap;

/// The door keeper, one per broker.
pub struct IpGuard {
    /// Swapped whole on reload; the table's counts, rates and bans carry over.
    settings: Swap<IpSettings>,
    table: IpTable,
}

impl IpGuard {
    pub fn new(settings: IpSettings) -> Self {
        Self {
            settings: Swap::new(settings),
            table: IpTable::default(),
        }
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

    /// A connection from `ip` arrived at `now`: admitted (counted) or refused.
    pub fn admit(&self, ip: IpAddr, now: Instant) -> Result<Admission, Refusal> {
        let ip = ip.to_canonical();
        let settings = &*self.settings();
        if settings.deny.iter().any(|block| block.contains(ip)) {
            return Err(Refusal::Denied);
        }
        if !settings.allow.is_empty() && !settings.allow.iter().any(|block| block.contains(ip)) {
            return Err(Refusal::NotAllowed);
        }
        if !settings.tracks() {
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

    /// A login from `ip` failed at `now`; true when that banned the address.
    pub fn login_failed(&self, ip: IpAddr, now: Instant) -> bool {
        let settings = self.settings();
        if settings.ban_after_auth_failures == 0 {
            return false;
        }
        self.table.login_failed(ip.to_canonical(), now, &settings)
    }
}
