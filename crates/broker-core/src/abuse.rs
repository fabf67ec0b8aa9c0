//! The reloadable abuse limits every shard reads (besides `[ip]`, see `guard/`): the
//! per-connection publish rates (`shard/throttle.rs` keeps the buckets) and overload mode, in
//! which new connections are refused while the process's resident memory is too high.
//!
//! Read on hot paths (every PUBLISH while a rate is set, every accept), so the values are
//! relaxed atomics on a line only a reload writes, not a lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tracing::{info, warn};

use crate::settings::{CoreConfig, OverloadSettings, PublishRates};

/// How often the resident memory is read at most.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// `sampled_ms` before the first sample (or after a reload): sample at the next check.
const NEVER: u64 = u64::MAX;

/// The limits in force, replaced on reload.
#[derive(Debug)]
pub struct AbuseLimits {
    publish_messages: AtomicU64,
    publish_bytes: AtomicU64,
    overload: Overload,
}

impl AbuseLimits {
    pub fn new(config: &CoreConfig) -> Self {
        let limits = Self {
            publish_messages: AtomicU64::new(0),
            publish_bytes: AtomicU64::new(0),
            overload: Overload::default(),
        };
        limits.update(config);
        limits
    }

    /// Puts `config`'s publish rates and overload thresholds in force (SIGHUP): later PUBLISH
    /// packets and accepts are judged by them; the memory is read again at the next accept.
    pub fn update(&self, config: &CoreConfig) {
        self.publish_messages
            .store(config.publish_rates.messages, Relaxed);
        self.publish_bytes
            .store(config.publish_rates.bytes, Relaxed);
        self.overload.update(config.overload);
    }

    /// The per-connection publish rates in force.
    pub fn publish_rates(&self) -> PublishRates {
        PublishRates {
            messages: self.publish_messages.load(Relaxed),
            bytes: self.publish_bytes.load(Relaxed),
        }
    }

    /// Whether a connection accepted now is refused for overload. `since_start` is the broker's
    /// time since start; the resident memory is read when the last reading is older than
    /// [`SAMPLE_EVERY`] (by one shard at a time).
    pub fn refuses_connections(&self, since_start: Duration) -> bool {
        self.overload.refuses(since_start)
    }
}

/// Overload mode's thresholds and state (shared by all shards).
#[derive(Debug)]
struct Overload {
    high: AtomicU64,
    low: AtomicU64,
    /// In overload mode now.
    active: AtomicBool,
    /// When the memory was last read, in milliseconds since the broker started.
    sampled_ms: AtomicU64,
}

impl Default for Overload {
    fn default() -> Self {
        Self {
            high: AtomicU64::new(0),
            low: AtomicU64::new(0),
            active: AtomicBool::new(false),
            sampled_ms: AtomicU64::new(NEVER),
        }
    }
}

impl Overload {
    fn update(&self, settings: OverloadSettings) {
        self.low.store(settings.memory_low, Relaxed);
        self.high.store(settings.memory_high, Relaxed);
        self.sampled_ms.store(NEVER, Relaxed);
    }

    fn refuses(&self, since_start: Duration) -> bool {
        let high = self.high.load(Relaxed);
        if high == 0 {
            if self.active.swap(false, Relaxed) {
                info!(
                    "overload mode turned off (overload.memory_high_bytes = 0): accepting connections again"
                );
            }
            return false;
        }
        let now_ms = u64::try_from(since_start.as_millis()).unwrap_or(NEVER - 1);
        let last = self.sampled_ms.load(Relaxed);
        let due = last == NEVER || now_ms.saturating_sub(last) >= SAMPLE_EVERY.as_millis() as u64;
        if due
            && self
                .sampled_ms
                .compare_exchange(last, now_ms, Relaxed, Relaxed)
                .is_ok()
        {
            match ring_runtime::resident_memory_bytes() {
                Ok(rss) => self.judge(rss, high),
                Err(error) => warn!(%error, "overload mode: cannot read the resident memory"),
            }
        }
        self.active.load(Relaxed)
    }

    /// Enters overload above `high`, leaves it below the low mark; one log line per change.
    fn judge(&self, rss: u64, high: u64) {
        let low = self.low.load(Relaxed);
        if rss > high {
            if !self.active.swap(true, Relaxed) {
                warn!(
                    rss,
                    memory_high_bytes = high,
                    "overload: resident memory above overload.memory_high_bytes; refusing new connections"
                );
            }
        } else if rss < low && self.active.swap(false, Relaxed) {
            info!(
                rss,
                memory_low_bytes = low,
                "overload over: resident memory below overload.memory_low_bytes; accepting new connections again"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overload(high: u64, low: u64) -> Overload {
        let overload = Overload::default();
        overload.update(OverloadSettings {
            memory_high: high,
            memory_low: low,
        });
        overload
    }

    #[test]
    fn overload_has_hysteresis() {
        let overload = overload(1000, 800);
        overload.judge(900, 1000);
        assert!(!overload.active.load(Relaxed), "below high: accepting");
        overload.judge(1001, 1000);
        assert!(overload.active.load(Relaxed), "above high: refusing");
        overload.judge(900, 1000);
        assert!(
            overload.active.load(Relaxed),
            "between the marks: still refusing"
        );
        overload.judge(799, 1000);
        assert!(!overload.active.load(Relaxed), "below low: accepting again");
    }

    #[test]
    fn memory_is_read_at_most_every_interval_and_again_after_a_reload() {
        let overload = overload(1, 0);
        assert!(
            overload.refuses(Duration::from_secs(1)),
            "any process is above 1 byte"
        );
        overload.high.store(u64::MAX, Relaxed);
        overload.low.store(u64::MAX - 1, Relaxed);
        assert!(
            overload.refuses(Duration::from_millis(1050)),
            "the last reading is recent: it stands"
        );
        assert!(!overload.refuses(Duration::from_millis(1100)));
        overload.update(OverloadSettings {
            memory_high: 1,
            memory_low: 0,
        });
        assert!(
            overload.refuses(Duration::from_millis(1101)),
            "a reload reads again at once"
        );
        overload.update(OverloadSettings::default());
        assert!(!overload.refuses(Duration::from_millis(1102)), "off");
    }
}
