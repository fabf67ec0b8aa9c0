//! `[limits]` publish rates and `[overload]`.

/// Per-connection publish rates; 0 means no limit. Each is a token bucket holding one
/// second's worth (the burst).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PublishRates {
    /// PUBLISH packets per second.
    pub messages: u64,
    /// PUBLISH bytes (whole packets as sent) per second.
    pub bytes: u64,
}

impl PublishRates {
    /// Whether either rate is limited.
    pub fn any(&self) -> bool {
        self.messages != 0 || self.bytes != 0
    }
}

/// `[overload]`: while the resident memory is above `memory_high` new connections are
/// refused, until it falls below `memory_low`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OverloadSettings {
    /// Bytes of RSS above which the broker refuses new connections (0: never).
    pub memory_high: u64,
    /// Bytes of RSS below which it accepts again (below `memory_high`).
    pub memory_low: u64,
}

impl OverloadSettings {
    /// Whether overload mode is on at all.
    pub fn enabled(&self) -> bool {
        self.memory_high != 0
    }
}
