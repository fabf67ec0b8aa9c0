//! The per-address table of [`super::IpGuard`]: open connections, a connect-rate bucket,
//! recent login failures and a ban, per address; bounded by `ip.max_tracked`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

use dashmap::DashMap;

use super::rules::{Admission, BanRule, IpSettings, Refusal};

/// Usernames with recent failures tracked per address at most (beyond that a new username
/// is not tracked; the address's own count still applies).
const MAX_USERS_PER_ADDRESS: usize = 256;

/// Recent failed logins (of an address, or of one username from it) and the ban they led to.
struct Failures {
    count: u32,
    since: Instant,
    banned_until: Option<Instant>,
}

impl Failures {
    fn new(now: Instant) -> Self {
        Self {
            count: 0,
            since: now,
            banned_until: None,
        }
    }

    fn banned(&self, now: Instant) -> bool {
        self.banned_until.is_some_and(|until| now < until)
    }

    /// No ban in force and no failure within the window.
    fn idle(&self, now: Instant, settings: &IpSettings) -> bool {
        !self.banned(now)
            && now.saturating_duration_since(self.since) > settings.auth_failure_window
    }

    /// One more failure, counted in `settings.auth_failure_window`; `true` when it reaches
    /// `threshold` and starts a ban of `settings.ban_duration`.
    fn record(&mut self, now: Instant, threshold: u32, settings: &IpSettings) -> bool {
        if now.saturating_duration_since(self.since) > settings.auth_failure_window {
            self.count = 0;
            self.since = now;
        }
        self.count += 1;
        if self.count < threshold {
            return false;
        }
        self.count = 0;
        self.banned_until = Some(now + settings.ban_duration);
        true
    }
}

/// What is known about one client address.
struct IpState {
    connections: u32,
    /// Connects left in the rate bucket, and when it was last refilled.
    tokens: f64,
    refilled: Instant,
    /// The address's own failures and ban.
    failures: Failures,
    /// Per username (`None`: no username): recent failures and bars.
    users: HashMap<Option<Box<str>>, Failures>,
}

impl IpState {
    fn new(now: Instant, settings: &IpSettings) -> Self {
        Self {
            connections: 0,
            tokens: f64::from(settings.max_connect_rate),
            refilled: now,
            failures: Failures::new(now),
            users: HashMap::new(),
        }
    }

    /// Nothing worth keeping: no connection, no ban (a pruned entry starts afresh).
    fn idle(&self, now: Instant) -> bool {
        self.connections == 0
            && !self.failures.banned(now)
            && self.users.values().all(|user| !user.banned(now))
    }

    fn take_token(&mut self, now: Instant, rate: u32) -> bool {
        if rate == 0 {
            return true;
        }
        let rate = f64::from(rate);
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(rate);
        self.refilled = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

#[derive(Default)]
pub(super) struct IpTable {
    states: DashMap<IpAddr, IpState>,
}

impl IpTable {
    pub(super) fn admit(
        &self,
        ip: IpAddr,
        now: Instant,
        settings: &IpSettings,
    ) -> Result<Admission, Refusal> {
        if !self.states.contains_key(&ip) && !self.make_room(now, settings.max_tracked) {
            // Full of busy addresses: serve this one untracked rather than refuse it.
            return Ok(None);
        }
        let mut state = self
            .states
            .entry(ip)
            .or_insert_with(|| IpState::new(now, settings));
        if state.failures.banned(now) {
            return Err(Refusal::Banned);
        }
        if settings.max_connections != 0 && state.connections >= settings.max_connections {
            return Err(Refusal::TooManyConnections);
        }
        if !state.take_token(now, settings.max_connect_rate) {
            return Err(Refusal::TooFast);
        }
        state.connections += 1;
        Ok(Some(ip))
    }

    pub(super) fn release(&self, ip: IpAddr) {
        if let Some(mut state) = self.states.get_mut(&ip) {
            state.connections = state.connections.saturating_sub(1);
        }
    }

    /// A failed login of `user` from `ip`: counted per address and per (address, username);
    /// what it led to, if anything.
    pub(super) fn login_failed(
        &self,
        ip: IpAddr,
        user: Option<&str>,
        now: Instant,
        settings: &IpSettings,
    ) -> Option<BanRule> {
        if !self.states.contains_key(&ip) && !self.make_room(now, settings.max_tracked) {
            return None;
        }
        let mut state = self
            .states
            .entry(ip)
            .or_insert_with(|| IpState::new(now, settings));
        let mut banned = None;
        if settings.ban_user_after_auth_failures != 0 {
            let key: Option<Box<str>> = user.map(Into::into);
            if !state.users.contains_key(&key) && state.users.len() >= MAX_USERS_PER_ADDRESS {
                state.users.retain(|_, user| !user.idle(now, settings));
            }
            if state.users.contains_key(&key) || state.users.len() < MAX_USERS_PER_ADDRESS {
                let entry = state.users.entry(key).or_insert_with(|| Failures::new(now));
                if entry.record(now, settings.ban_user_after_auth_failures, settings) {
                    banned = Some(BanRule::User);
                }
            }
        }
        if settings.ban_after_auth_failures != 0
            && state
                .failures
                .record(now, settings.ban_after_auth_failures, settings)
        {
            banned = Some(BanRule::Address);
        }
        banned
    }

    /// Whether `user` is barred from `ip` at `now`.
    pub(super) fn user_banned(&self, ip: IpAddr, user: Option<&str>, now: Instant) -> bool {
        let Some(state) = self.states.get(&ip) else {
            return false;
        };
        let key: Option<Box<str>> = user.map(Into::into);
        state.users.get(&key).is_some_and(|user| user.banned(now))
    }

    /// Whether a new address fits: prunes idle entries when the table is full.
    fn make_room(&self, now: Instant, max: usize) -> bool {
        if self.states.len() < max {
            return true;
        }
        self.states.retain(|_, state| !state.idle(now));
        self.states.len() < max
    }
}
