//! `[slow_subscribers]`: the slow-subscriber rankings (`broker_core::slow`); raw, typed and
//! validated.

use std::time::Duration;

use super::error::ConfigError;
use super::fields::narrow;
use super::overlay::raw_section;
use crate::settings::SlowSubscriberSettings;

raw_section!(
    /// `[slow_subscribers]`
    RawSlowSubscribers { threshold_ms: u64, top: u64, expire_seconds: u64 }
);

impl RawSlowSubscribers {
    pub(super) fn validate(&self) -> Result<SlowSubscriberSettings, ConfigError> {
        let threshold: u64 = narrow(
            "slow_subscribers.threshold_ms",
            &self.threshold_ms,
            1,
            3_600_000,
        )?;
        let top: u64 = narrow("slow_subscribers.top", &self.top, 0, 1_000)?;
        let expire: u64 = narrow(
            "slow_subscribers.expire_seconds",
            &self.expire_seconds,
            1,
            86_400,
        )?;
        Ok(SlowSubscriberSettings {
            threshold: Duration::from_millis(threshold),
            top: top as usize,
            expire: Duration::from_secs(expire),
        })
    }
}

#[cfg(test)]
#[path = "slow_tests.rs"]
mod tests;
