//! What the `[ip]` guard is told and what it answers: its settings ([`IpSettings`]), why it
//! refuses a connection ([`Refusal`]) and what an admitted connection gives back at close
//! ([`Admission`]). `table.rs` keeps the per-address counts, `mod.rs` puts them together.

use std::net::IpAddr;
use std::time::Duration;
use transport::Cidr;

/// `[ip]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpSettings {
    /// When not empty, only these blocks may connect.
    pub allow: Vec<Cidr>,
    /// Blocks refused at accept (before `allow`).
    pub deny: Vec<Cidr>,
    /// Blocks that no per-address limit applies to and that are never banned (a fleet behind
    /// one NAT, monitoring). `deny` and `allow` still apply.
    pub exempt: Vec<Cidr>,
    /// Open connections per address (0: no limit).
    pub max_connections: u32,
    /// New connections per second per address, with a burst of as many (0: no limit).
    pub max_connect_rate: u32,
    /// Failed logins within `auth_failure_window` that ban an address (0: never).
    pub ban_after_auth_failures: u32,
    /// Failed logins of one username from one address within `auth_failure_window` that bar
    /// that username from that address for `ban_duration` (0: never); other usernames from the
    /// address are not affected.
    pub ban_user_after_auth_failures: u32,
    pub auth_failure_window: Duration,
    pub ban_duration: Duration,
    /// Addresses tracked at most (the table is pruned of idle ones when full; beyond that a
    /// new address is served untracked rather than refused).
    pub max_tracked: usize,
}

impl IpSettings {
    /// Whether anything per address is tracked (else only the lists apply).
    pub(super) fn tracks(&self) -> bool {
        self.max_connections != 0
            || self.max_connect_rate != 0
            || self.ban_after_auth_failures != 0
            || self.ban_user_after_auth_failures != 0
    }

    /// Whether `ip` (canonical) is in `exempt`.
    pub(super) fn exempts(&self, ip: IpAddr) -> bool {
        self.exempt.iter().any(|block| block.contains(ip))
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

/// What a failed login led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BanRule {
    /// The address is banned (`ip.ban_after_auth_failures`).
    Address,
    /// The username is barred from this address (`ip.ban_user_after_auth_failures`).
    User,
}

impl BanRule {
    /// The configuration key of the rule, for the log.
    pub fn key(self) -> &'static str {
        match self {
            Self::Address => "ip.ban_after_auth_failures",
            Self::User => "ip.ban_user_after_auth_failures",
        }
    }
}

/// An admitted connection's address, to give back when it closes (`None`: not tracked).
pub type Admission = Option<IpAddr>;
