//! The gatekeeper: external authentication backends (`auth.backends`) asked without blocking a
//! reactor.
//!
//! A shard answers what it can at once: the password file, and logins and topic checks found
//! in the caches. Anything else becomes a [`workers::Job`]; the connection waits (a CONNECT in
//! `Phase::AwaitingAuth`, a PUBLISH or SUBSCRIBE with its connection parked) until the
//! worker's [`workers::Verdict`] arrives in the shard's inbox and wakes it. Waiting jobs are
//! bounded by `auth.max_pending`; beyond it a CONNECT is refused with 0x89 Server busy.
//! [`exchange`] does the AUTH exchange's work that needs a backend (a SCRAM credential kept in
//! Redis, a round of a method an HTTP service drives) the same way.

pub mod build;
mod cache;
pub mod chain;
pub mod exchange;
pub mod grant;
pub mod keys;
pub mod workers;

use std::time::{Duration, Instant};

use cache::TtlCache;
use chain::{Chain, LoginVerdict};
use keys::{AclKey, LoginKey};
use workers::{Busy, Core, Job, Verdict, Workers};

use crate::backend::LoginRequest;
use ring_runtime::{RuntimeControl, ShardId};

/// `[auth]`'s worker and cache settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatekeeperSettings {
    /// Worker threads (each asks one backend question at a time).
    pub workers: usize,
    /// Logins and topic checks waiting for a worker, at most.
    pub max_pending: usize,
    /// Cached answers, at most, per cache (logins, topic checks).
    pub cache_entries: usize,
    /// How long an answer stays cached.
    pub cache_ttl: Duration,
}

/// The backend chain, its caches and its workers.
pub struct Gatekeeper {
    workers: Workers,
}

impl Gatekeeper {
    /// Starts the workers for `chain` (with at least one external backend).
    pub fn start(
        chain: Chain,
        settings: &GatekeeperSettings,
        shards: usize,
    ) -> std::io::Result<Self> {
        let (entries, ttl) = (settings.cache_entries, settings.cache_ttl);
        let logins = TtlCache::new(entries, ttl);
        let topics = TtlCache::new(entries, ttl);
        let core = Core::new(chain, logins, topics, shards, settings.max_pending);
        Ok(Self {
            workers: Workers::start(core, settings.workers)?,
        })
    }

    pub fn chain(&self) -> &Chain {
        &self.workers.core.chain
    }

    /// Lets the workers wake shards.
    pub fn set_control(&self, control: RuntimeControl) {
        self.workers.set_control(control);
    }

    /// A cached verdict for a login asked from link `start`.
    pub fn cached_login(&self, request: &LoginRequest, start: usize) -> Option<LoginVerdict> {
        self.workers
            .core
            .logins
            .get(&LoginKey::of(request, start), Instant::now())
    }

    /// A cached answer for a topic check.
    pub fn cached_topic(&self, key: &AclKey) -> Option<bool> {
        self.workers.core.topics.get(key, Instant::now())
    }

    /// Queues a question for the workers.
    pub fn submit(&self, job: Job) -> Result<(), Busy> {
        self.workers.submit(job)
    }

    /// The verdicts waiting for `shard`.
    pub fn take_verdicts(&self, shard: ShardId) -> Vec<Verdict> {
        self.workers.core.take_verdicts(shard)
    }

    /// Forgets every cached answer (the password file, ACL or backends changed).
    pub fn forget_answers(&self) {
        self.workers.core.logins.clear();
        self.workers.core.topics.clear();
    }

    /// Figures for `$SYS`.
    pub fn figures(&self) -> AuthFigures {
        let core = &self.workers.core;
        AuthFigures {
            pending: self.workers.pending(),
            cached_logins: core.logins.len(),
            cached_topics: core.topics.len(),
            backend_failures: core.failures.load(std::sync::atomic::Ordering::Relaxed),
        }
    }
}

/// What the gatekeeper reports in `$SYS/broker/auth/...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthFigures {
    /// Logins and topic checks queued or being asked.
    pub pending: usize,
    /// Logins cached.
    pub cached_logins: usize,
    /// Topic answers cached.
    pub cached_topics: usize,
    /// Backend questions that failed (down, timed out, bad answer) so far.
    pub backend_failures: usize,
}
