//! State shared by all shards, in parts: configuration, counters, the session directory, the
//! change order, the broker-wide limits, access control, the door, the clock, persistence and
//! the links to other brokers. Nothing here is touched per message except through relaxed
//! per-shard counters.

use crossbeam_utils::CachePadded;
use dashmap::DashMap;
use ring_runtime::Clock;
use router::{Sequencer, TopicLimits};
use session_store::{ByteBudget, OverflowPolicy, QueueLimits};

use crate::auth::Authenticator;
use crate::config::{Config, SlowConsumerPolicy};
use crate::metrics::Metrics;
use crate::shared_parts::{
    AccessControl, BrokerTime, ChangeOrder, Door, Links, Persistence, SessionDirectory,
    SharedLimits,
};

/// Shared broker state, one per broker, behind an `Arc` in every shard.
pub struct Shared {
    /// The validated configuration.
    pub config: Config,
    /// Per-shard counters.
    pub metrics: Metrics,
    /// Client identifier -> the shard that holds its session, and the key counters.
    pub directory: SessionDirectory,
    /// The total order of replicated changes, and how far each shard has applied it.
    pub order: ChangeOrder,
    /// Topic validation limits, queue bounds and the broker-wide byte budgets.
    pub limits: SharedLimits,
    /// The authentication hook, the password and ACL files, the external backends.
    pub(crate) access: AccessControl,
    /// The listeners, the connection count, the `[ip]` guard, publish rates and overload.
    pub(crate) door: Door,
    /// The bound on connection lifecycle log lines (`log.max_lifecycle_per_sec`, reloadable).
    pub lifecycle: crate::logging::LifecycleLog,
    /// The runtime's clock, and when the broker started on it.
    pub time: BrokerTime,
    /// The store thread's state, what was recovered at start-up, the stored-queue sequence.
    pub persistence: Persistence,
    /// The running bridges' board and the cluster link.
    pub(crate) links: Links,
}

impl Shared {
    /// Reloads the TLS certificates, the password file and the ACL file, and empties the
    /// backends' caches. Whatever fails to load keeps its old contents; the errors are
    /// returned.
    pub(crate) fn reload_files(&self) -> Vec<String> {
        let mut errors: Vec<String> = (self.door.transports.reload().iter())
            .map(ToString::to_string)
            .collect();
        errors.extend(self.access.reload(&self.config.auth));
        errors
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
        let limits = SharedLimits {
            topics: TopicLimits {
                max_length: usize::from(config.limits.max_topic_length),
                max_levels: usize::from(config.limits.max_topic_levels),
            },
            queues: queue_limits(&config),
            partial_frames: ByteBudget::new(config.limits.max_partial_frame_bytes),
        };
        let door = Door::new(&config);
        let lifecycle = crate::logging::LifecycleLog::new(config.log.max_lifecycle_per_sec);
        Self {
            limits,
            config,
            metrics: Metrics::new(shards),
            directory: SessionDirectory::new(DashMap::new()),
            order: ChangeOrder {
                sequencer: Sequencer::new(),
                applied: (0..shards.max(1))
                    .map(|_| CachePadded::new(std::sync::atomic::AtomicU64::new(0)))
                    .collect(),
            },
            access: AccessControl::new(auth),
            door,
            lifecycle,
            time: BrokerTime::new(clock),
            persistence: Persistence::default(),
            links: Links::default(),
        }
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use ring_runtime::ShardId;
    use router::SubscriberId;

    use crate::directory::{BIRTH_SHARD_BITS, birth_shard};

    /// The 2^32nd session gets a fresh key, not key 0 again (a 32-bit counter wrapped there).
    #[test]
    fn subscriber_keys_do_not_wrap_at_32_bits() {
        let config = crate::config::default_raw().unwrap().validate().unwrap();
        let shared = Shared::new(config, 1, Box::new(crate::auth::AllowAll));
        let shard = ShardId::new(0);
        let first = shared.directory.new_subscriber(shard);
        shared
            .directory
            .next_subscriber
            .store(u64::from(u32::MAX), Ordering::Relaxed);
        let keys: Vec<SubscriberId> = (0..3)
            .map(|_| shared.directory.new_subscriber(shard))
            .collect();
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
        let keys: Vec<SubscriberId> = shards
            .iter()
            .map(|s| shared.directory.new_subscriber(*s))
            .collect();
        for (key, shard) in keys.iter().zip(shards) {
            assert_eq!(birth_shard(*key), shard);
            assert_ne!(key.0, 0, "session keys are non-zero");
        }
        let distinct: std::collections::HashSet<_> = keys.iter().map(|k| k.0).collect();
        assert_eq!(distinct.len(), keys.len());
    }
}
