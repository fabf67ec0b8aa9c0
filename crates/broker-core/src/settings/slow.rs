//! `[slow_subscribers]`: which subscribers the broker reports as slow (`crate::slow`).

use std::time::Duration;

/// `[slow_subscribers]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowSubscriberSettings {
    /// A delivery slower than this (received to the PUBACK / PUBREC, or to the write for
    /// QoS 0) makes its subscriber slow.
    pub threshold: Duration,
    /// How many subscribers each ranking keeps (0: no rankings, nothing recorded).
    pub top: usize,
    /// A subscriber neither slow nor dropping for this long leaves the rankings.
    pub expire: Duration,
}

impl Default for SlowSubscriberSettings {
    fn default() -> Self {
        Self {
            threshold: Duration::from_millis(500),
            top: 10,
            expire: Duration::from_secs(300),
        }
    }
}
