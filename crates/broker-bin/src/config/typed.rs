//! The validated configuration: typed values only, every limit in force.

use std::time::Duration;

/// Which I/O backend the runtime uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// io_uring when the kernel offers it, else epoll.
    Auto,
    /// io_uring, failing if it is unavailable.
    Uring,
    /// epoll.
    Epoll,
}

/// How long write pacing holds a stream (`runtime.write_pacing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePacingChoice {
    /// Nothing while a shard has idle time, up to `write_interval` once it is busy.
    Adaptive,
    /// Always `write_interval`.
    Fixed,
}

/// What happens to a QoS 1/2 message when a session's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowConsumerPolicy {
    /// Drop the oldest queued message and count it.
    DropOldest,
    /// Disconnect the slow client with 0x97 Quota Exceeded.
    Disconnect,
}

/// The validated broker configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listeners: super::listeners::ListenerSettings,
    pub runtime: RuntimeSettings,
    pub log_level: tracing::Level,
    /// `[log]` format and lifecycle-line bound.
    pub log: super::log::LogSettings,
    pub connection: ConnectionSettings,
    pub limits: LimitSettings,
    pub routing: RoutingSettings,
    pub queues: QueueSettings,
    pub sessions: SessionSettings,
    pub retained: RetainedSettings,
    /// Interval between `$SYS` updates; `None` disables `$SYS`.
    pub sys_interval: Option<Duration>,
    pub persistence: PersistenceSettings,
    /// `[cluster]`: `None` on a single node.
    pub cluster: Option<super::cluster::ClusterSettings>,
    pub auth: super::auth::AuthSettings,
    pub ip: crate::guard::IpSettings,
    /// `[limits] max_publish_rate`, `max_publish_bytes_rate` (reloadable).
    pub publish_rates: super::abuse::PublishRates,
    /// `[overload]` (reloadable).
    pub overload: super::abuse::OverloadSettings,
    /// `[[bridges]]` (reloadable: added, removed and changed bridges start, stop, restart).
    pub bridges: Vec<super::bridges::BridgeSettings>,
    /// `[http]`: the operations HTTP listener.
    pub http: super::http::HttpSettings,
}

/// Which storage engine keeps sessions and retained messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageEngine {
    /// sled, in `persistence.dir`.
    Sled,
    /// redb, in `persistence.dir`.
    Redb,
    /// A log checkpointed into redb, in `persistence.dir`.
    Log,
    /// Memory only: everything is lost on restart.
    None,
}

impl StorageEngine {
    /// The name the config file uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sled => "sled",
            Self::Redb => "redb",
            Self::Log => "log",
            Self::None => "none",
        }
    }
}

/// When stored state reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every group commit is synced before the acknowledgements it covers leave.
    Batch,
    /// Synced every `sync_interval`; acknowledgements do not wait (the last interval may be lost).
    Interval,
}

/// `[persistence]`
#[derive(Debug, Clone)]
pub struct PersistenceSettings {
    pub engine: StorageEngine,
    /// The engine's directory (created if missing).
    pub dir: std::path::PathBuf,
    pub sync: SyncPolicy,
    pub sync_interval: Duration,
    /// Per stored session: queued messages held in memory; the rest stay on disk only and
    /// are read back as the queue drains.
    pub memory_queue_messages: u32,
    /// The engine's page cache, at most (bytes).
    pub cache_bytes: u64,
    /// The `log` engine: the size each of its two log files is created with (bytes).
    pub log_bytes: u64,
    /// The `log` engine: the most a log file grows to (bytes, at least `log_bytes`).
    pub log_max_bytes: u64,
}

impl PersistenceSettings {
    /// Whether anything is stored at all.
    pub fn enabled(&self) -> bool {
        self.engine != StorageEngine::None
    }

    /// Whether QoS 1/2 acknowledgements wait for the disk.
    pub fn acks_wait(&self) -> bool {
        self.enabled() && self.sync == SyncPolicy::Batch
    }
}

/// `[runtime]`
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    /// Shard count; `None` means one per available core.
    pub shards: Option<usize>,
    pub backend: BackendChoice,
    /// Replicated changes held ahead of a missing one before it is reported (never refused).
    pub max_pending_changes: usize,
    /// Message batches one shard's mailbox holds.
    pub mailbox_batches: usize,
    /// Messages a shard keeps for one destination whose mailbox is full before deliveries to
    /// it are dropped (control messages are never dropped).
    pub max_pending_posts: usize,
    /// Write pacing interval: the longest hold (zero: off).
    pub write_interval: std::time::Duration,
    /// Whether the hold follows the shard's load or is always the interval.
    pub write_pacing: WritePacingChoice,
    /// The scheduler slice shard threads ask for; `None` keeps the kernel's.
    pub sched_slice: Option<Duration>,
    /// Whether each shard thread is pinned to one core.
    pub pin_threads: bool,
    /// Frames shorter than this are copied into one send buffer per connection.
    pub coalesce_below: usize,
    /// Emptied send queues each shard keeps for reuse.
    pub spare_send_queues: usize,
    /// `listen(2)` backlog per shard listener; `None`: the kernel's maximum.
    pub listen_backlog: Option<i32>,
    /// How long accepting pauses after an accept ran out of file descriptors.
    pub accept_backoff: Duration,
    /// Receive buffers per shard (io_uring provided-buffer ring; a power of two).
    pub recv_buffers: u16,
    /// Bytes per receive buffer (also the epoll backend's read chunk).
    pub recv_buffer_size: u32,
}

/// `[routing]`
#[derive(Debug, Clone)]
pub struct RoutingSettings {
    pub shared_strategy: router::SharedStrategy,
}

/// `[connection]`
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    pub max_connections: u32,
    pub connect_timeout: Duration,
    /// `None` means no maximum.
    pub max_keep_alive: Option<u16>,
    /// `None` means clients may ask for no keep-alive.
    pub default_keep_alive: Option<u16>,
    pub max_client_id_len: u16,
}

/// `[limits]`
#[derive(Debug, Clone)]
pub struct LimitSettings {
    pub max_packet_size: u32,
    pub receive_maximum: u16,
    pub max_inflight_outbound: u16,
    pub topic_alias_maximum: u16,
    pub outbound_topic_alias_maximum: u16,
    pub max_topic_length: u16,
    pub max_topic_levels: u16,
    pub max_subscriptions_per_client: u32,
    /// Largest CONNECT accepted, checked from its fixed header.
    pub max_connect_size: u32,
    /// Most bytes held in partial frames over all connections.
    pub max_partial_frame_bytes: u64,
    /// Bytes of queued messages and partial frames freed after which every shard hands its free
    /// allocator memory back to the OS (0: never).
    pub return_memory_after_bytes: u64,
    /// How long freed allocator pages are kept for reuse before the allocator hands them back
    /// to the OS by itself (0: at once).
    pub free_memory_hold: Duration,
}

/// `[queues]`
#[derive(Debug, Clone)]
pub struct QueueSettings {
    pub outbound_bytes: u64,
    pub backlog_retry: Duration,
    pub max_queued_messages: u32,
    /// Most bytes queued for one session.
    pub max_queued_bytes: u64,
    /// Most bytes queued over all sessions.
    pub max_total_queued_bytes: u64,
    pub slow_consumer_policy: SlowConsumerPolicy,
}

/// `[sessions]`
#[derive(Debug, Clone)]
pub struct SessionSettings {
    pub max_session_expiry: Duration,
    pub max_sessions: u32,
}

/// `[retained]`
#[derive(Debug, Clone)]
pub struct RetainedSettings {
    pub max_messages: u32,
    pub max_bytes: u64,
}
