//! One webhook's settings (`[[webhooks]]` in the configuration; broker-bin parses and checks
//! the keys, this crate checks the values it relies on).

use std::time::Duration;

use broker_api::EventKind;

/// Where and what one webhook POSTs, and its bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// The endpoint (`http://` or `https://`).
    pub url: String,
    /// The kinds of event it gets (at least one).
    pub events: Vec<EventKind>,
    /// Topic filters a `message.published` event must match (empty: every topic).
    pub topics: Vec<String>,
    /// Whether `message.published` events carry the payload (base64).
    pub include_payload: bool,
    /// The most events in one POST.
    pub batch_max: usize,
    /// The longest an event waits for others to fill its batch.
    pub batch_wait: Duration,
    /// The most events waiting to be sent; more are dropped and counted.
    pub queue_capacity: usize,
    /// The most one POST may take.
    pub timeout: Duration,
    /// How many times a batch is POSTed before it is given up (and counted).
    pub max_attempts: u32,
    /// The wait before the second attempt, doubled before each next one up to `backoff_max`.
    pub backoff: Duration,
    pub backoff_max: Duration,
}

impl WebhookSettings {
    /// Settings for `url` and `events` with the defaults for the rest.
    pub fn new(url: impl Into<String>, events: Vec<EventKind>) -> Self {
        Self {
            url: url.into(),
            events,
            topics: Vec::new(),
            include_payload: false,
            batch_max: 100,
            batch_wait: Duration::from_millis(200),
            queue_capacity: 10_000,
            timeout: Duration::from_secs(5),
            max_attempts: 5,
            backoff: Duration::from_millis(200),
            backoff_max: Duration::from_secs(10),
        }
    }

    /// The wait before attempt `attempt` (2 and later).
    pub(crate) fn backoff_before(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(2).min(20);
        (self.backoff.saturating_mul(1 << doublings)).min(self.backoff_max)
    }
}
