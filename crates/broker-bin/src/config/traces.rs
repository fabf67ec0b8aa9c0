//! `[traces]`: the bounds of live traces (`broker_core::trace`); raw, typed and validated.

use std::time::Duration;

use broker_core::trace::TraceLimits;

use super::error::ConfigError;
use super::fields::narrow;
use super::overlay::raw_section;

raw_section!(
    /// `[traces]`
    RawTraces { max_traces: u64, max_bytes: u64, max_seconds: u64 }
);

impl RawTraces {
    pub(super) fn validate(&self) -> Result<TraceLimits, ConfigError> {
        let seconds: u64 = narrow("traces.max_seconds", &self.max_seconds, 1, 86_400)?;
        Ok(TraceLimits {
            max_traces: narrow("traces.max_traces", &self.max_traces, 1, 64)?,
            max_bytes: narrow("traces.max_bytes", &self.max_bytes, 1024, 1 << 30)?,
            max_duration: Duration::from_secs(seconds),
        })
    }
}
