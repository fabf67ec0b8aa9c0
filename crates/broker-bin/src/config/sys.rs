//! `[sys]`: how often the `$SYS` topics are updated; raw and validated.

use std::time::Duration;

use super::error::ConfigError;
use super::fields::in_range;
use super::overlay::raw_section;

raw_section!(
    /// `[sys]`
    RawSys { interval: u64 }
);

impl RawSys {
    /// Interval between `$SYS` updates; `None` (0) disables `$SYS`.
    pub(super) fn interval(&self) -> Result<Option<Duration>, ConfigError> {
        let secs = in_range("sys.interval", &self.interval, 0, 86_400)?;
        Ok((secs != 0).then(|| Duration::from_secs(secs)))
    }
}
