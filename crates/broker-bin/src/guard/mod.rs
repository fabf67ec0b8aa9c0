//! Abuse defence at the door (`[ip]`): allow and deny lists of address blocks, a connection
//! limit and a connection rate limit per client address, and a temporary ban of an address
//! after repeated failed logins. Shared by all shards; the per-address table is bounded.

mod cidr;
mod table;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use cidr::{Cidr, CidrError};
use table::IpTable;

use crate::swap::Swap;

/// `[ip]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpSettings {
    /// When not empty, only these blocks may connect.
    pub allow: Vec<Cidr>,
    /// Blocks refused at accept (before `allow`).
    pub deny: Vec<Cidr>,
    /// Open connections per address (0: no limit).
    pub max_connections: u32,
    /// New connections per second per address, with a burst of as many (0: no limit).
    pub max_connect_rate: u32,
    /// Failed logins within `auth_failure_window` that ban an address (0: never).
    pub ban_after_auth_failures: u32,
    pub auth_failure_window: Duration,
    pub ban_duration: Duration,
    /// Addresses tracked at most (the table is pruned of idle ones when full; beyond that a
    /// new address is served untracked rather than refused).
    pub max_tracked: usize,
}

impl IpSettings {
    /// Whether anything per address is tracked (else only the lists apply).
    fn tracks(&self) -> bool {
        self.max_connections != 0 || self.max_connect_rate != 0 || self.ban_after_auth_failures != 0
    }
}

/// Why a connection was refused at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("address in ip.deny")]
    Denied,
    #[error("address not in ip.allow")]
    NotAllowed,
    #[error("ip.max_connections reached for this address")]
    TooManyConnections,
    #[error("ip.max_connect_rate exceeded by this address")]
    TooFast,
    #[error("address banned after failed logins (ip.ban_after_auth_failures)")]
    Banned,
}

/// The door keeper, one per broker.
pub struct IpGuard {
    /// Swapped whole on reload; the table's counts, rates and bans carry over.
    settings: Swap<IpSettings>,
    table: IpTable,
}

/// An admitted connection's address, to give back when it closes (`None`: not tracked).
pub type Admission = Option<IpAddr>;

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
