//! `[persistence]`: the storage engine, its directory, sync policy and sizes; raw, typed and
//! validated.

use std::time::Duration;

use super::error::ConfigError;
use super::fields::{in_range, narrow, need};
use super::overlay::raw_section;
use crate::settings::{PersistenceSettings, StorageEngine, SyncPolicy};

raw_section!(
    /// `[persistence]`
    RawPersistence {
        engine: String,
        dir: String,
        sync: String,
        sync_interval_ms: u64,
        memory_queue_messages: u64,
        cache_mb: u64,
        log_mb: u64,
        log_max_mb: u64,
    }
);

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

impl RawPersistence {
    pub(super) fn validate(&self) -> Result<PersistenceSettings, ConfigError> {
        let engine = match need("persistence.engine", &self.engine)?.as_str() {
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
        let dir = need("persistence.dir", &self.dir)?;
        if dir.is_empty() {
            return Err(ConfigError::invalid("persistence.dir", "must not be empty"));
        }
        let sync = match need("persistence.sync", &self.sync)?.as_str() {
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
            &self.sync_interval_ms,
            1,
            60_000,
        )?;
        let log_mb = in_range("persistence.log_mb", &self.log_mb, 1, 4096)?;
        Ok(PersistenceSettings {
            engine,
            dir: dir.into(),
            sync,
            sync_interval: Duration::from_millis(interval),
            memory_queue_messages: narrow(
                "persistence.memory_queue_messages",
                &self.memory_queue_messages,
                1,
                1_000_000,
            )?,
            cache_bytes: in_range("persistence.cache_mb", &self.cache_mb, 1, 1 << 20)? << 20,
            log_bytes: log_mb << 20,
            log_max_bytes: log_max_mb(self, log_mb)? << 20,
        })
    }
}
