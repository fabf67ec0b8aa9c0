//! The abuse-defence keys beyond `[ip]` (both reloadable on SIGHUP): per-connection publish
//! rates (`[limits] max_publish_rate`, `max_publish_bytes_rate`) and the memory thresholds of
//! overload mode (`[overload]`).

use super::error::ConfigError;
use super::limits::RawLimits;
use super::overlay::raw_section;
use crate::settings::{OverloadSettings, PublishRates};

raw_section!(
    /// `[overload]`
    RawOverload {
        memory_high_bytes: u64,
        memory_low_bytes: u64,
    }
);

/// Most PUBLISH packets per second a connection may send (well above any real client).
const MAX_MESSAGE_RATE: u64 = 100_000_000;
/// Most PUBLISH bytes per second (1 TiB/s).
const MAX_BYTES_RATE: u64 = 1 << 40;
/// Largest memory threshold (1 PiB).
const MAX_MEMORY: u64 = 1 << 50;

/// A required integer in `0..=max`, or an error naming `key`.
fn up_to(key: &'static str, value: Option<u64>, max: u64) -> Result<u64, ConfigError> {
    let value = value.ok_or_else(|| ConfigError::invalid(key, "missing (and no default)"))?;
    if value > max {
        return Err(ConfigError::invalid(
            key,
            format!("{value} is out of range 0..={max}"),
        ));
    }
    Ok(value)
}

impl RawLimits {
    pub(super) fn publish_rates(&self) -> Result<PublishRates, ConfigError> {
        Ok(PublishRates {
            messages: up_to(
                "limits.max_publish_rate",
                self.max_publish_rate,
                MAX_MESSAGE_RATE,
            )?,
            bytes: up_to(
                "limits.max_publish_bytes_rate",
                self.max_publish_bytes_rate,
                MAX_BYTES_RATE,
            )?,
        })
    }
}

impl RawOverload {
    pub(super) fn validate(&self) -> Result<OverloadSettings, ConfigError> {
        let high = up_to(
            "overload.memory_high_bytes",
            self.memory_high_bytes,
            MAX_MEMORY,
        )?;
        let low = up_to(
            "overload.memory_low_bytes",
            self.memory_low_bytes,
            MAX_MEMORY,
        )?;
        if high == 0 {
            return Ok(OverloadSettings::default());
        }
        if low >= high {
            return Err(ConfigError::invalid(
                "overload.memory_low_bytes",
                format!("{low} must be below overload.memory_high_bytes ({high})"),
            ));
        }
        Ok(OverloadSettings {
            memory_high: high,
            // 0: 90% of the high mark.
            memory_low: if low == 0 { high / 10 * 9 } else { low },
        })
    }
}

#[cfg(test)]
#[path = "abuse_tests.rs"]
mod tests;
