//! State shared by all shards: configuration, counters, the session directory and the change
//! sequencer. Nothing here is touched per message except through relaxed per-shard counters.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use dashmap::DashMap;
use ring_runtime::{Clock, ShardId};
use router::{Sequencer, SubscriberId, TopicLimits};

use crate::auth::Authenticator;
use crate::config::{Config, SlowConsumerPolicy};
use crate::directory::{ClaimId, SessionLocation};
use crate::metrics::Metrics;
use crate::store::{Recovery, StoreState};
use session_store::{ByteBudget, OverflowPolicy, QueueLimits};
use std::sync::Arc;

/// Shared broker state, one per broker, behind an `Arc` in every shard.
pub struct Shared {
    /// The validated configuration.
    pub config: Config,
    /// Per-shard counters.
    pub metrics: Metrics,
    /// Client identifier -> the shard that holds its session (the takeover directory). Keyed
    /// by a copy of the id in an exact-size allocation: a 16-byte key instead of a 32-byte
    /// `Bytes` handle, and the session's own id stays unshared (no reference-count block).
    pub sessions: DashMap<Box<str>, SessionLocation>,
    /// Orders every replicated change.
    pub sequencer: Sequencer,
    /// Hands out subscriber keys: 64 bits, so a key is never handed out twice (at a million
    /// sessions a second the counter would last 584,000 years).
    next_subscriber: AtomicU64,
    /// Hands out claim ids.
    next_claim: AtomicU32,
    /// Connections open now, over all shards (for `max_connections`).
    pub connections: AtomicUsize,
    /// Topic validation limits from the config.
    pub topic_limits: TopicLimits,
    /// The authentication and authorization hook.
    pub auth: Box<dyn Authenticator>,
    /// The TLS and WebSocket listeners (certificates, paths).
    pub(crate) transports: crate::transport::Transports,
    /// The password file's users, when `auth.password_file` is set (swapped on reload).
    pub(crate) passwords: Option<crate::swap::Swap<access::PasswordFile>>,
    /// The ACL file's rules, when `auth.acl_file` is set (swapped on reload).
    pub(crate) acl: Option<crate::swap::Swap<access::AclFile>>,
    /// The external authentication backends and their workers (`auth.backends` naming any).
    pub(crate) gatekeeper: Option<access::gatekeeper::Gatekeeper>,
    /// The log level's control, the configuration in force, and where a reload reads the
    /// configuration from (SIGHUP and the admin API).
    pub(crate) live: crate::reload::ReloadState,
    /// The `[ip]` guard: address lists and per-address limits.
    pub(crate) guard: crate::guard::IpGuard,
    /// Publish rates and overload mode (reloadable).
    pub(crate) abuse: crate::abuse::AbuseLimits,
    /// The bound on connection lifecycle log lines (`log.max_lifecycle_per_sec`, reloadable).
    pub lifecycle: crate::logging::LifecycleLog,
    /// When the broker started (for `$SYS/broker/uptime`), on [`Self::clock`].
    pub started: Instant,
    /// The runtime's clock (the shards read it through `ShardCtx::now`).
    pub clock: Clock,
    /// Per shard: how far it has applied the change order (for forwarding clean-up).
    pub applied: Box<[CachePadded<AtomicU64>]>,
    /// Bytes held in partial frames over all connections (`limits.max_partial_frame_bytes`):
    /// the MQTT carries, and what TLS and WebSocket layers hold between reads
    /// ([`PartialFrameBudget`]).
    pub partial_frames: Arc<ByteBudget>,
    /// The bounds of every session's queue, with the broker-wide queued-bytes budget.
    pub queue_limits: QueueLimits,
    /// What the store thread publishes (`None` with `persistence.engine = "none"`).
    pub store: Option<Arc<StoreState>>,
    /// State recovered at start-up, until the shards take it.
    pub recovery: Recovery,
    /// The next stored-queue sequence number (above every recovered one).
    pub next_seq: AtomicU64,
    /// The running bridges' counters (for `$SYS/broker/bridges/...`).
    pub(crate) bridges: Arc<bridge::BridgeBoard>,
    /// The cluster link (`[cluster]`), `None` on a single node.
    pub cluster: Option<cluster::ClusterLink>,
}

impl Shared {
    /// The password file in force, if one is configured.
    pub(crate) fn passwords(&self) -> Option<Arc<access::PasswordFile>> {
        self.passwords.as_ref().map(crate::swap::Swap::get)
    }

    /// The ACL in force, if one is configured.
    pub(crate) fn acl(&self) -> Option<Arc<access::AclFile>> {
        self.acl.as_ref().map(crate::swap::Swap::get)
    }

    /// Reads the ACL file again; on failure the old rules stay in force. Connected clients'
    /// subscriptions keep their admission; what leaves is checked against the new rules where
    /// a subscription was only partly readable.
    pub(crate) fn reload_acl(&self) -> Result<(), access::AccessFileError> {
        let (Some(acl), Some(path)) = (&self.acl, &self.config.auth.acl_file) else {
            return Ok(());
        };
        acl.replace(access::AclFile::load(path)?);
        Ok(())
    }

    /// Reloads the TLS certificates, the password file and the ACL file, and empties the
    /// backends' caches. Whatever fails to load keeps its old contents; the errors are
    /// returned.
    pub(crate) fn reload_files(&self) -> Vec<String> {
        let mut errors: Vec<String> = self
            .transports
            .reload()
            .iter()
            .map(ToString::to_string)
            .collect();
        if let Err(error) = self.reload_passwords() {
            errors.push(error.to_string());
        }
        if let Err(error) = self.reload_acl() {
            errors.push(error.to_string());
        }
        if let Some(gatekeeper) = &self.gatekeeper {
            // Credentials or rules may have changed behind the backends too.
            gatekeeper.forget_answers();
        }
        errors
    }

    /// Reads the password file again; on failure the old users stay in force.
    pub(crate) fn reload_passwords(&self) -> Result<(), access::AccessFileError> {
        let (Some(passwords), Some(path)) = (&self.passwords, &self.config.auth.password_file)
        else {
            return Ok(());
        };
        passwords.replace(access::PasswordFile::load(path)?);
        Ok(())
    }

    /// Shared state for `shards` shards on the system clock.
    pub fn new(config: Config, shards: usize, auth: Box<dyn Authenticator>) -> Self {
        Self::with_clock(config, shards, auth, Clock::System)
    }

    /// Shared state for `shards` shards whose runtime reads the time from `clock`.
    pub fn with_clock(
        config: Config,
        shards: usize,
        auth: Box<dyn Authenticator>,
        clock: Clock,
    ) -> Self {
        let topic_limits = TopicLimits {
            max_length: usize::from(config.limits.max_topic_length),
            max_levels: usize::from(config.limits.max_topic_levels),
        };
        let partial_frames = Arc::new(ByteBudget::new(config.limits.max_partial_frame_bytes));
        let queue_limits = queue_limits(&config);
        let guard = crate::guard::IpGuard::new(config.ip.clone());
        let abuse = crate::abuse::AbuseLimits::new(&config);
        let lifecycle = crate::logging::LifecycleLog::new(config.log.max_lifecycle_per_sec);
        let live = crate::reload::ReloadState::new(config.clone());
        Self {
            partial_frames,
            queue_limits,
            config,
            metrics: Metrics::new(shards),
            sessions: DashMap::new(),
            sequencer: Sequencer::new(),
            next_subscriber: AtomicU64::new(1),
            next_claim: AtomicU32::new(0),
            connections: AtomicUsize::new(0),
            topic_limits,
            auth,
            transports: crate::transport::Transports::plain(),
            passwords: None,
            acl: None,
            gatekeeper: None,
            live,
            guard,
            abuse,
            lifecycle,
            started: clock.now(),
            clock,
            applied: (0..shards.max(1))
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            store: None,
            recovery: Recovery::default(),
            next_seq: AtomicU64::new(1),
            bridges: Arc::default(),
            cluster: None,
        }
    }

    /// A new stored-queue sequence number: increasing broker-wide, so a session's stored queue
    /// keeps its order wherever the session moves.
    pub fn new_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// A new subscriber key for a session created on `shard`, never handed out before in this
    /// broker run (a reused key would receive another session's messages). Its low
    /// [`BIRTH_SHARD_BITS`] name `shard` ([`birth_shard`]): the replicas record a session's
    /// shard only once it has moved elsewhere.
    pub fn new_subscriber(&self, shard: ShardId) -> SubscriberId {
        let count = self.next_subscriber.fetch_add(1, Ordering::Relaxed);
        assert!(
            count < 1 << (u64::BITS - BIRTH_SHARD_BITS),
            "invariant: 2^48 subscriber keys are never exhausted"
        );
        SubscriberId(count << BIRTH_SHARD_BITS | shard.index() as u64)
    }

    /// Time since the broker started, on its clock.
    pub fn uptime(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.started)
    }

    /// A new claim id.
    pub fn new_claim(&self) -> ClaimId {
        ClaimId(self.next_claim.fetch_add(1, Ordering::Relaxed))
    }
}

/// The queue bounds `[queues]` sets, with an empty broker-wide budget.
fn queue_limits(config: &Config) -> QueueLimits {
    let queues = &config.queues;
    QueueLimits {
        max_len: queues.max_queued_messages as usize,
        max_bytes: queues.max_queued_bytes,
        policy: match queues.slow_consumer_policy {
            SlowConsumerPolicy::DropOldest => OverflowPolicy::DropOldest,
            SlowConsumerPolicy::Disconnect => OverflowPolicy::Refuse,
        },
        budget: std::sync::Arc::new(ByteBudget::new(queues.max_total_queued_bytes)),
    }
}

/// The low bits of a subscriber key that name the shard it was handed out on (shard ids are
/// 16-bit).
pub const BIRTH_SHARD_BITS: u32 = 16;

/// The shard a subscriber key was handed out on ([`Shared::new_subscriber`]).
pub fn birth_shard(subscriber: SubscriberId) -> ShardId {
    ShardId::new((subscriber.0 & ((1 << BIRTH_SHARD_BITS) - 1)) as u16)
}

/// The partial-frame budget as the transports' shared budget: what a TLS or WebSocket layer
/// holds between reads is charged with the MQTT carries (see `Transports::with_hold_limit`).
pub struct PartialFrameBudget(pub Arc<ByteBudget>);

impl crate::transport::SharedBudget for PartialFrameBudget {
    fn try_charge(&self, bytes: u64) -> bool {
        self.0.try_charge(bytes)
    }

    fn release(&self, bytes: u64) {
        self.0.release(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 2^32nd session gets a fresh key, not key 0 again (a 32-bit counter wrapped there).
    #[test]
    fn subscriber_keys_do_not_wrap_at_32_bits() {
        let config = crate::config::default_raw().unwrap().validate().unwrap();
        let shared = Shared::new(config, 1, Box::new(crate::auth::AllowAll));
        let shard = ShardId::new(0);
        let first = shared.new_subscriber(shard);
        shared
            .next_subscriber
            .store(u64::from(u32::MAX), Ordering::Relaxed);
        let keys: Vec<SubscriberId> = (0..3).map(|_| shared.new_subscriber(shard)).collect();
        assert_eq!(keys[0].0 >> BIRTH_SHARD_BITS, u64::from(u32::MAX));
        assert!(keys[1].0 > keys[0].0 && keys[2].0 > keys[1].0);
        assert!(keys.iter().all(|k| *k != first));
    }

    /// A key names the shard it was handed out on, the highest shard id included, and keys
    /// handed out on different shards never collide.
    #[test]
    fn a_subscriber_key_names_its_birth_shard() {
        let config = crate::config::default_raw().unwrap().validate().unwrap();
        let shared = Shared::new(config, 1, Box::new(crate::auth::AllowAll));
        let shards = [0, 1, 7, u16::MAX].map(ShardId::new);
        let keys: Vec<SubscriberId> = shards.iter().map(|s| shared.new_subscriber(*s)).collect();
        for (key, shard) in keys.iter().zip(shards) {
            assert_eq!(birth_shard(*key), shard);
            assert_ne!(key.0, 0, "session keys are non-zero");
        }
        let distinct: std::collections::HashSet<_> = keys.iter().map(|k| k.0).collect();
        assert_eq!(distinct.len(), keys.len());
    }
}
