//! The shard's accept back-off state, driven by `accept.rs`.

use std::time::Duration;

/// The shard's accept pause state.
pub(super) struct AcceptPause {
    pub(super) backoff: Duration,
    /// A resume timer is armed.
    pub(super) paused: bool,
    /// The timer fired: resume after this turn's timers.
    pub(super) resume_due: bool,
    /// Refusals since the last warning.
    pub(super) refused: u64,
}

impl AcceptPause {
    pub(super) fn new(backoff: Duration) -> Self {
        Self {
            backoff,
            paused: false,
            resume_due: false,
            refused: 0,
        }
    }
}
