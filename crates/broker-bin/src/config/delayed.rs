//! `[delayed]`: delayed publish (`$delayed/{seconds}/{topic}`); raw, typed and validated.

use super::error::ConfigError;
use super::fields::{narrow, need};
use super::overlay::raw_section;
use crate::settings::DelayedSettings;

raw_section!(
    /// `[delayed]`
    RawDelayed { enabled: bool, max_messages: u64, max_delay_seconds: u64 }
);

impl RawDelayed {
    pub(super) fn validate(&self) -> Result<DelayedSettings, ConfigError> {
        Ok(DelayedSettings {
            enabled: need("delayed.enabled", &self.enabled)?,
            max_messages: narrow("delayed.max_messages", &self.max_messages, 1, 100_000_000)?,
            max_delay_seconds: narrow(
                "delayed.max_delay_seconds",
                &self.max_delay_seconds,
                1,
                u64::from(broker_core::delayed::MAX_DELAY_SECONDS),
            )?,
        })
    }
}

#[cfg(test)]
#[path = "delayed_tests.rs"]
mod tests;
