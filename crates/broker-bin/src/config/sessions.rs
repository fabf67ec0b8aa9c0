//! `[sessions]`, `[queues]`, `[retained]` and `[routing]`: what the broker keeps for its
//! clients and how a shared subscription picks its receiver; raw, typed and validated.

use std::time::Duration;

use router::SharedStrategy;

use super::error::ConfigError;
use super::fields::{in_range, narrow, need};
use super::overlay::raw_section;
use crate::settings::{
    QueueSettings, RetainedSettings, RoutingSettings, SessionSettings, SlowConsumerPolicy,
};

raw_section!(
    /// `[routing]`
    RawRouting { shared_strategy: String, exclusive_subscriptions: bool }
);
raw_section!(
    /// `[queues]`
    RawQueues {
        outbound_bytes: u64,
        backlog_retry_ms: u64,
        max_queued_messages: u64,
        max_queued_bytes: u64,
        max_total_queued_bytes: u64,
        max_total_outbound_bytes: u64,
        slow_consumer_policy: String,
    }
);
raw_section!(
    /// `[sessions]`
    RawSessions { max_session_expiry: u64, max_sessions: u64 }
);
raw_section!(
    /// `[retained]`
    RawRetained { max_messages: u64, max_bytes: u64, delivery_per_turn: u64 }
);

impl RawRouting {
    /// `[routing]` with the `[[rewrite]]` rules and `[[auto_subscribe]]` entries read beside
    /// it.
    pub(super) fn validate(
        &self,
        rewrite: router::TopicRewrite,
        auto_subscribe: Vec<crate::settings::AutoSubscription>,
    ) -> Result<RoutingSettings, ConfigError> {
        const KEY: &str = "routing.shared_strategy";
        let shared_strategy = match need(KEY, &self.shared_strategy)?.as_str() {
            "round-robin" => SharedStrategy::RoundRobin,
            "random" => SharedStrategy::Random,
            "hash-publisher" => SharedStrategy::HashByPublisher,
            "hash-topic" => SharedStrategy::HashByTopic,
            "sticky" => SharedStrategy::Sticky,
            other => {
                return Err(ConfigError::invalid(
                    KEY,
                    format!(
                        "unknown strategy {other:?} (expected round-robin, random, hash-publisher, hash-topic or sticky)"
                    ),
                ));
            }
        };
        let exclusive_subscriptions = need(
            "routing.exclusive_subscriptions",
            &self.exclusive_subscriptions,
        )?;
        Ok(RoutingSettings {
            shared_strategy,
            exclusive_subscriptions,
            rewrite,
            auto_subscribe,
        })
    }
}

impl RawQueues {
    pub(super) fn validate(&self) -> Result<QueueSettings, ConfigError> {
        let policy = match need("queues.slow_consumer_policy", &self.slow_consumer_policy)?.as_str()
        {
            "drop-oldest" => SlowConsumerPolicy::DropOldest,
            "disconnect" => SlowConsumerPolicy::Disconnect,
            other => {
                return Err(ConfigError::invalid(
                    "queues.slow_consumer_policy",
                    format!(
                        "unknown policy {other:?} (expected \"drop-oldest\" or \"disconnect\")"
                    ),
                ));
            }
        };
        Ok(QueueSettings {
            outbound_bytes: in_range("queues.outbound_bytes", &self.outbound_bytes, 1024, 1 << 40)?,
            backlog_retry: Duration::from_millis(in_range(
                "queues.backlog_retry_ms",
                &self.backlog_retry_ms,
                1,
                10_000,
            )?),
            max_queued_messages: narrow(
                "queues.max_queued_messages",
                &self.max_queued_messages,
                1,
                100_000_000,
            )?,
            max_queued_bytes: in_range(
                "queues.max_queued_bytes",
                &self.max_queued_bytes,
                1024,
                1 << 40,
            )?,
            max_total_queued_bytes: in_range(
                "queues.max_total_queued_bytes",
                &self.max_total_queued_bytes,
                1024,
                1 << 44,
            )?,
            max_total_outbound_bytes: in_range(
                "queues.max_total_outbound_bytes",
                &self.max_total_outbound_bytes,
                1024,
                1 << 44,
            )?,
            slow_consumer_policy: policy,
        })
    }
}

impl RawSessions {
    pub(super) fn validate(&self) -> Result<SessionSettings, ConfigError> {
        Ok(SessionSettings {
            max_session_expiry: Duration::from_secs(in_range(
                "sessions.max_session_expiry",
                &self.max_session_expiry,
                0,
                u64::from(u32::MAX),
            )?),
            max_sessions: narrow("sessions.max_sessions", &self.max_sessions, 1, 100_000_000)?,
        })
    }
}

impl RawRetained {
    pub(super) fn validate(&self) -> Result<RetainedSettings, ConfigError> {
        Ok(RetainedSettings {
            max_messages: narrow("retained.max_messages", &self.max_messages, 0, 100_000_000)?,
            max_bytes: in_range("retained.max_bytes", &self.max_bytes, 0, 1 << 40)?,
            delivery_per_turn: narrow(
                "retained.delivery_per_turn",
                &self.delivery_per_turn,
                1,
                1_000_000,
            )?,
        })
    }
}
