//! Turns a raw configuration into a typed [`Config`], naming the key of the first bad value.

use std::time::Duration;

use super::error::ConfigError;
use super::fields::{in_range, narrow, need};
use super::raw::{RawConfig, RawPersistence};
use super::typed::{
    BackendChoice, Config, ConnectionSettings, LimitSettings, PersistenceSettings, QueueSettings,
    RetainedSettings, RoutingSettings, RuntimeSettings, SessionSettings, SlowConsumerPolicy,
    StorageEngine, SyncPolicy, WritePacingChoice,
};
use router::SharedStrategy;

/// Smallest maximum packet size that still fits a CONNECT with a short client id.
const MIN_PACKET_SIZE: u64 = 64;
/// The MQTT wire limit of a packet: 1 type byte, 4 length bytes and 268,435,455 remaining bytes.
const MAX_PACKET_SIZE: u64 = 268_435_460;
/// Largest `runtime.listen_backlog` accepted (the kernel lowers it to `net.core.somaxconn`).
const MAX_LISTEN_BACKLOG: u64 = 1 << 20;
/// Most receive buffers per shard: io_uring's provided-buffer ring holds at most 32,768.
const MAX_RECV_BUFFERS: u64 = 32_768;
/// Smallest and largest receive buffer, in bytes.
const MIN_RECV_BUFFER: u64 = 512;
const MAX_RECV_BUFFER: u64 = 1 << 20;
/// The MQTT limit of a UTF-8 string (topic, client id).
const MAX_STRING: u64 = 65_535;

/// `persistence.log_max_mb`: at least `log_mb`.
fn log_max_mb(p: &RawPersistence, log_mb: u64) -> Result<u64, ConfigError> {
    let max = in_range("persistence.log_max_mb", &p.log_max_mb, 1, 65_536)?;
    if max < log_mb {
        return Err(ConfigError::invalid(
            "persistence.log_max_mb",
            format!(
                "{max} is below persistence.log_mb ({log_mb}): a log file never shrinks below its first size"
            ),
        ));
    }
    Ok(max)
}

/// `runtime.sched_slice_us`: 0 keeps the kernel's slice, else 100..=100,000 µs (the range the
/// kernel accepts; it would clamp anything else, and a silently changed value misleads).
fn sched_slice(v: &Option<u64>) -> Result<Option<Duration>, ConfigError> {
    const KEY: &str = "runtime.sched_slice_us";
    match need(KEY, v)? {
        0 => Ok(None),
        micros @ 100..=100_000 => Ok(Some(Duration::from_micros(micros))),
        other => Err(ConfigError::invalid(
            KEY,
            format!(
                "{other} µs is outside the kernel's range for a scheduler slice (100..=100000, or 0 for the kernel's default)"
            ),
        )),
    }
}

/// A receive-buffer count: a power of two in `1..=MAX_RECV_BUFFERS` (io_uring's buffer ring
/// indexes its entries with a mask).
fn power_of_two(key: &'static str, v: &Option<u64>) -> Result<u16, ConfigError> {
    let count: u16 = narrow(key, v, 1, MAX_RECV_BUFFERS)?;
    if !count.is_power_of_two() {
        return Err(ConfigError::invalid(
            key,
            format!("{count} is not a power of two (io_uring's buffer ring needs one)"),
        ));
    }
    Ok(count)
}

/// A keep-alive style value where 0 means "none".
fn optional_u16(key: &'static str, v: &Option<u64>) -> Result<Option<u16>, ConfigError> {
    let value: u16 = narrow(key, v, 0, u64::from(u16::MAX))?;
    Ok((value != 0).then_some(value))
}

impl RawConfig {
    /// Validates every key and builds the typed configuration.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let listeners = self.listeners.validate()?;
        Ok(Config {
            auth: self.auth.validate(&listeners)?,
            ip: self.ip.validate()?,
            publish_rates: self.limits.publish_rates()?,
            overload: self.overload.validate()?,
            bridges: super::bridges::validate(
                self.bridges.as_deref().unwrap_or_default(),
                &listeners,
            )?,
            http: self.http.validate()?,
            cluster: self
                .cluster
                .as_ref()
                .map(super::cluster::validate)
                .transpose()?,
            listeners,
            runtime: self.runtime()?,
            log_level: self.log_level()?,
            log: self.log.settings()?,
            connection: self.connection()?,
            limits: self.limits()?,
            routing: self.routing()?,
            queues: self.queues()?,
            sessions: self.sessions()?,
            retained: self.retained()?,
            sys_interval: {
                let secs = in_range("sys.interval", &self.sys.interval, 0, 86_400)?;
                (secs != 0).then(|| Duration::from_secs(secs))
            },
            persistence: self.persistence()?,
        })
    }

    fn persistence(&self) -> Result<PersistenceSettings, ConfigError> {
        let p = &self.persistence;
        let engine = match need("persistence.engine", &p.engine)?.as_str() {
            "sled" => StorageEngine::Sled,
            "redb" => StorageEngine::Redb,
            "log" => StorageEngine::Log,
            "none" => StorageEngine::None,
            other => {
                return Err(ConfigError::invalid(
                    "persistence.engine",
                    format!(
                        "unknown engine {other:?} (expected \"log\", \"redb\", \"sled\" or \"none\")"
                    ),
                ));
            }
        };
        let dir = need("persistence.dir", &p.dir)?;
        if dir.is_empty() {
            return Err(ConfigError::invalid("persistence.dir", "must not be empty"));
        }
        let sync = match need("persistence.sync", &p.sync)?.as_str() {
            "batch" => SyncPolicy::Batch,
            "interval" => SyncPolicy::Interval,
            other => {
                return Err(ConfigError::invalid(
                    "persistence.sync",
                    format!("unknown sync policy {other:?} (expected \"batch\" or \"interval\")"),
                ));
            }
        };
        let interval = in_range(
            "persistence.sync_interval_ms",
            &p.sync_interval_ms,
            1,
            60_000,
        )?;
        let log_mb = in_range("persistence.log_mb", &p.log_mb, 1, 4096)?;
        Ok(PersistenceSettings {
            engine,
            dir: dir.into(),
            sync,
            sync_interval: Duration::from_millis(interval),
            memory_queue_messages: narrow(
                "persistence.memory_queue_messages",
                &p.memory_queue_messages,
                1,
                1_000_000,
            )?,
            cache_bytes: in_range("persistence.cache_mb", &p.cache_mb, 1, 1 << 20)? << 20,
            log_bytes: log_mb << 20,
            log_max_bytes: log_max_mb(p, log_mb)? << 20,
        })
    }

    fn runtime(&self) -> Result<RuntimeSettings, ConfigError> {
        let shards = in_range(
            "runtime.shards",
            &self.runtime.shards.map(|s| s as u64),
            0,
            1024,
        )?;
        let backend = match need("runtime.backend", &self.runtime.backend)?.as_str() {
            "auto" => BackendChoice::Auto,
            "uring" | "io_uring" => BackendChoice::Uring,
            "epoll" => BackendChoice::Epoll,
            other => {
                return Err(ConfigError::invalid(
                    "runtime.backend",
                    format!(
                        "unknown backend {other:?} (expected \"auto\", \"uring\" or \"epoll\")"
                    ),
                ));
            }
        };
        let write_pacing = match need("runtime.write_pacing", &self.runtime.write_pacing)?.as_str()
        {
            "adaptive" => WritePacingChoice::Adaptive,
            "fixed" => WritePacingChoice::Fixed,
            other => {
                return Err(ConfigError::invalid(
                    "runtime.write_pacing",
                    format!("unknown write pacing {other:?} (expected \"adaptive\" or \"fixed\")"),
                ));
            }
        };
        Ok(RuntimeSettings {
            shards: (shards != 0).then_some(shards as usize),
            backend,
            max_pending_changes: narrow(
                "runtime.max_pending_changes",
                &self.runtime.max_pending_changes,
                16,
                1 << 24,
            )?,
            mailbox_batches: narrow(
                "runtime.mailbox_batches",
                &self.runtime.mailbox_batches,
                1,
                1 << 20,
            )?,
            max_pending_posts: narrow(
                "runtime.max_pending_posts",
                &self.runtime.max_pending_posts,
                1,
                1 << 24,
            )?,
            write_interval: std::time::Duration::from_micros(in_range(
                "runtime.write_interval_us",
                &self.runtime.write_interval_us,
                0,
                1_000_000,
            )?),
            write_pacing,
            sched_slice: sched_slice(&self.runtime.sched_slice_us)?,
            pin_threads: need("runtime.pin_threads", &self.runtime.pin_threads)?,
            coalesce_below: narrow(
                "runtime.coalesce_below",
                &self.runtime.coalesce_below,
                0,
                64 * 1024,
            )?,
            spare_send_queues: narrow(
                "runtime.spare_send_queues",
                &self.runtime.spare_send_queues,
                0,
                65_536,
            )?,
            listen_backlog: {
                let backlog: i32 = narrow(
                    "runtime.listen_backlog",
                    &self.runtime.listen_backlog,
                    0,
                    MAX_LISTEN_BACKLOG,
                )?;
                (backlog != 0).then_some(backlog)
            },
            accept_backoff: Duration::from_millis(in_range(
                "runtime.accept_backoff_ms",
                &self.runtime.accept_backoff_ms,
                1,
                60_000,
            )?),
            recv_buffers: power_of_two("runtime.recv_buffers", &self.runtime.recv_buffers)?,
            recv_buffer_size: narrow(
                "runtime.recv_buffer_size",
                &self.runtime.recv_buffer_size,
                MIN_RECV_BUFFER,
                MAX_RECV_BUFFER,
            )?,
        })
    }

    fn routing(&self) -> Result<RoutingSettings, ConfigError> {
        const KEY: &str = "routing.shared_strategy";
        let shared_strategy = match need(KEY, &self.routing.shared_strategy)?.as_str() {
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
        Ok(RoutingSettings { shared_strategy })
    }

    fn log_level(&self) -> Result<tracing::Level, ConfigError> {
        let text = need("log.level", &self.log.level)?;
        text.parse().map_err(|_| {
            ConfigError::invalid(
                "log.level",
                format!("unknown level {text:?} (expected error, warn, info, debug or trace)"),
            )
        })
    }

    fn connection(&self) -> Result<ConnectionSettings, ConfigError> {
        let c = &self.connection;
        Ok(ConnectionSettings {
            max_connections: narrow(
                "connection.max_connections",
                &c.max_connections,
                1,
                10_000_000,
            )?,
            connect_timeout: Duration::from_secs(in_range(
                "connection.connect_timeout",
                &c.connect_timeout,
                1,
                3600,
            )?),
            max_keep_alive: optional_u16("connection.max_keep_alive", &c.max_keep_alive)?,
            default_keep_alive: optional_u16(
                "connection.default_keep_alive",
                &c.default_keep_alive,
            )?,
            max_client_id_len: narrow(
                "connection.max_client_id_len",
                &c.max_client_id_len,
                23,
                MAX_STRING,
            )?,
        })
    }

    fn limits(&self) -> Result<LimitSettings, ConfigError> {
        let limits = self.limit_values()?;
        if limits.max_partial_frame_bytes < u64::from(limits.max_packet_size) {
            return Err(ConfigError::invalid(
                "limits.max_partial_frame_bytes",
                format!(
                    "{} is below limits.max_packet_size ({}): a largest packet could never arrive",
                    limits.max_partial_frame_bytes, limits.max_packet_size
                ),
            ));
        }
        Ok(limits)
    }

    fn limit_values(&self) -> Result<LimitSettings, ConfigError> {
        let l = &self.limits;
        let u16_max = u64::from(u16::MAX);
        Ok(LimitSettings {
            max_packet_size: narrow(
                "limits.max_packet_size",
                &l.max_packet_size,
                MIN_PACKET_SIZE,
                MAX_PACKET_SIZE.min(u64::from(u32::MAX)),
            )?,
            receive_maximum: narrow("limits.receive_maximum", &l.receive_maximum, 1, u16_max)?,
            max_inflight_outbound: narrow(
                "limits.max_inflight_outbound",
                &l.max_inflight_outbound,
                1,
                u16_max,
            )?,
            topic_alias_maximum: narrow(
                "limits.topic_alias_maximum",
                &l.topic_alias_maximum,
                0,
                u16_max,
            )?,
            outbound_topic_alias_maximum: narrow(
                "limits.outbound_topic_alias_maximum",
                &l.outbound_topic_alias_maximum,
                0,
                u16_max,
            )?,
            max_topic_length: narrow(
                "limits.max_topic_length",
                &l.max_topic_length,
                1,
                MAX_STRING,
            )?,
            max_topic_levels: narrow("limits.max_topic_levels", &l.max_topic_levels, 1, u16_max)?,
            max_subscriptions_per_client: narrow(
                "limits.max_subscriptions_per_client",
                &l.max_subscriptions_per_client,
                1,
                1_000_000,
            )?,
            max_connect_size: narrow(
                "limits.max_connect_size",
                &l.max_connect_size,
                MIN_PACKET_SIZE,
                MAX_PACKET_SIZE.min(u64::from(u32::MAX)),
            )?,
            max_partial_frame_bytes: in_range(
                "limits.max_partial_frame_bytes",
                &l.max_partial_frame_bytes,
                MIN_PACKET_SIZE,
                1 << 40,
            )?,
            return_memory_after_bytes: in_range(
                "limits.return_memory_after_bytes",
                &l.return_memory_after_bytes,
                0,
                1 << 40,
            )?,
            free_memory_hold: Duration::from_millis(in_range(
                "limits.free_memory_hold_ms",
                &l.free_memory_hold_ms,
                0,
                60_000,
            )?),
        })
    }

    fn queues(&self) -> Result<QueueSettings, ConfigError> {
        let q = &self.queues;
        let policy = match need("queues.slow_consumer_policy", &q.slow_consumer_policy)?.as_str() {
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
            outbound_bytes: in_range("queues.outbound_bytes", &q.outbound_bytes, 1024, 1 << 40)?,
            backlog_retry: Duration::from_millis(in_range(
                "queues.backlog_retry_ms",
                &q.backlog_retry_ms,
                1,
                10_000,
            )?),
            max_queued_messages: narrow(
                "queues.max_queued_messages",
                &q.max_queued_messages,
                1,
                100_000_000,
            )?,
            max_queued_bytes: in_range(
                "queues.max_queued_bytes",
                &q.max_queued_bytes,
                1024,
                1 << 40,
            )?,
            max_total_queued_bytes: in_range(
                "queues.max_total_queued_bytes",
                &q.max_total_queued_bytes,
                1024,
                1 << 44,
            )?,
            slow_consumer_policy: policy,
        })
    }

    fn sessions(&self) -> Result<SessionSettings, ConfigError> {
        let s = &self.sessions;
        Ok(SessionSettings {
            max_session_expiry: Duration::from_secs(in_range(
                "sessions.max_session_expiry",
                &s.max_session_expiry,
                0,
                u64::from(u32::MAX),
            )?),
            max_sessions: narrow("sessions.max_sessions", &s.max_sessions, 1, 100_000_000)?,
        })
    }

    fn retained(&self) -> Result<RetainedSettings, ConfigError> {
        let r = &self.retained;
        Ok(RetainedSettings {
            max_messages: narrow("retained.max_messages", &r.max_messages, 0, 100_000_000)?,
            max_bytes: in_range("retained.max_bytes", &r.max_bytes, 0, 1 << 40)?,
        })
    }
}
