//! `[log]`: the level, the output format and the bound on connection lifecycle lines; raw,
//! typed and validated.

use super::error::ConfigError;
use super::fields::need;
use super::overlay::raw_section;
use crate::settings::{LogFormat, LogSettings};

raw_section!(
    /// `[log]`
    RawLog {
        level: String,
        format: String,
        max_lifecycle_per_sec: u64,
    }
);

/// Most connection lifecycle lines per second that `log.max_lifecycle_per_sec` may allow.
const MAX_LIFECYCLE_PER_SEC: u64 = 1_000_000;

impl RawLog {
    pub(super) fn level(&self) -> Result<tracing::Level, ConfigError> {
        let text = need("log.level", &self.level)?;
        text.parse().map_err(|_| {
            ConfigError::invalid(
                "log.level",
                format!("unknown level {text:?} (expected error, warn, info, debug or trace)"),
            )
        })
    }

    pub(super) fn settings(&self) -> Result<LogSettings, ConfigError> {
        let format = match self.format.as_deref().unwrap_or("text") {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(ConfigError::invalid(
                    "log.format",
                    format!("unknown format {other:?} (expected \"text\" or \"json\")"),
                ));
            }
        };
        let rate = self.max_lifecycle_per_sec.unwrap_or(100);
        if rate > MAX_LIFECYCLE_PER_SEC {
            return Err(ConfigError::invalid(
                "log.max_lifecycle_per_sec",
                format!("{rate} is out of range 0..={MAX_LIFECYCLE_PER_SEC}"),
            ));
        }
        Ok(LogSettings {
            format,
            max_lifecycle_per_sec: rate as u32,
        })
    }
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
