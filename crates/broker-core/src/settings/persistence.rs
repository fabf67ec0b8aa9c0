//! `[persistence]`: the storage engine, its directory and when it syncs.

use std::time::Duration;

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
