//! `[delayed]`: delayed publish (`crate::delayed`).

/// EMQX's largest delay, in seconds (`delayed.max_delay_seconds`' ceiling).
pub const MAX_DELAY_SECONDS: u32 = 4_294_967;

/// `[delayed]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayedSettings {
    /// `$delayed/{seconds}/{topic}` publishes are delayed (off: an ordinary `$` topic).
    pub enabled: bool,
    /// Most delayed messages pending broker-wide; beyond, a delayed publish is refused.
    pub max_messages: u32,
    /// The longest delay a publish may ask for, in seconds.
    pub max_delay_seconds: u32,
}

impl Default for DelayedSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            max_messages: 10_000,
            max_delay_seconds: MAX_DELAY_SECONDS,
        }
    }
}
