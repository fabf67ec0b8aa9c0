//! State shared by all shards, in parts: configuration, counters, the session directory, the
//! change order, the broker-wide limits, access control, the door, the clock, persistence and
//! the links to other brokers. Nothing here is touched per message except through relaxed
//! per-shard counters.

use dashmap::DashMap;
use ring_runtime::Clock;
use router::TopicLimits;
use session_store::{ByteBudget, OverflowPolicy, QueueLimits};

use crate::auth::Authenticator;
use crate::metrics::Metrics;
use crate::settings::{CoreConfig, SlowConsumerPolicy};
use crate::shared_parts::{
    AccessControl, BrokerTime, ChangeOrder, Door, Links, Persistence, SessionDirectory,
    SharedLimits,
};

/// Shared broker state, one per broker, behind an `Arc` in every shard.
pub struct Shared {
    /// The validated configuration.
    pub config: CoreConfig,
    /// Per-shard counters.
    pub metrics: std::sync::Arc<Metrics>,
    /// Client identifier -> the shard that holds its session, and the key counters.
    pub directory: SessionDirectory,
    /// The total order of replicated changes, and how far each shard has applied it.
    pub order: ChangeOrder,
    /// Topic validation limits, queue bounds and the broker-wide byte budgets.
    pub limits: SharedLimits,
    /// The authentication hook, the password and ACL files, the external backends.
    pub access: AccessControl,
    /// The listeners, the connection count, the `[ip]` guard, publish rates and overload.
    pub door: Door,
    /// The bound on connection lifecycle log lines (`log.max_lifecycle_per_sec`, reloadable).
    pub lifecycle: crate::lifecycle::LifecycleLog,
    /// The runtime's clock, and when the broker started on it.
    pub time: BrokerTime,
    /// The store thread's state, what was recovered at start-up, the stored-queue sequence.
    pub persistence: Persistence,
    /// The running bridges' board and the cluster link.
    pub links: Links,
    /// Topic rewrite rules, which session holds each `$exclusive/` filter, delayed publish.
    pub topic_rules: crate::topic_rules::TopicRules,
}

impl Shared {
    /// Reloads the TLS (and QUIC) certificates, the password file and the ACL file, and empties the
    /// backends' caches. Whatever fails to load keeps its old contents; the errors are
    /// returned.
    pub fn reload_files(&self) -> Vec<String> {
        let mut errors: Vec<String> = (self.door.transports.reload().iter())
            .chain(&self.door.quic.reload())
            .map(ToString::to_string)
            .collect();
        errors.extend(self.access.reload(&self.config.auth));
        errors
    }

    /// Shared state for `shards` shards on the system clock.
    pub fn new(config: CoreConfig, shards: usize, auth: Box<dyn Authenticator>) -> Self {
        Self::with_clock(config, shards, auth, Clock::System)
    }

    /// Shared state for `shards` shards whose runtime reads the time from `clock`.
    pub fn with_clock(
        config: CoreConfig,
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
            partial_frames: std::sync::Arc::new(ByteBudget::new(
                config.limits.max_partial_frame_bytes,
            )),
            outbound: crate::outbound::OutboundBudget::new(
                config.queues.outbound_bytes,
                config.queues.max_total_outbound_bytes,
                shards,
            ),
        };
        let door = Door::new(&config);
        let lifecycle = crate::lifecycle::LifecycleLog::new(config.log.max_lifecycle_per_sec);
        let topic_rules = crate::topic_rules::TopicRules {
            rewrite: config.routing.rewrite.clone(),
            exclusive: crate::exclusive::ExclusiveSubscriptions::new(
                config.routing.exclusive_subscriptions,
            ),
            delayed: crate::delayed::DelayedPublish::new(config.delayed.clone()),
        };
        let links = Links {
            traces: std::sync::Arc::new(crate::trace::Traces::new(config.traces.clone())),
            ..Links::default()
        };
        Self {
            limits,
            config,
            metrics: std::sync::Arc::new(Metrics::new(shards)),
            directory: SessionDirectory::new(DashMap::new()),
            order: ChangeOrder::new(shards.max(1)),
            access: AccessControl::new(auth),
            door,
            lifecycle,
            time: BrokerTime::new(clock),
            persistence: Persistence::default(),
            links,
            topic_rules,
        }
    }
}

/// The queue bounds `[queues]` sets, with an empty broker-wide budget.
fn queue_limits(config: &CoreConfig) -> QueueLimits {
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
