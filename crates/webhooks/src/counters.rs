//! What became of one webhook's events, for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

use broker_api::EventHookFigures;

/// Events counted by what became of them.
#[derive(Debug, Default)]
pub struct WebhookCounters {
    /// In a batch that got a 2xx answer.
    pub delivered: AtomicU64,
    /// Refused at once: the webhook's queue was full.
    pub overflowed: AtomicU64,
    /// In a batch given up after `max_attempts` POSTs without a 2xx answer.
    pub given_up: AtomicU64,
    /// POSTs that failed (no answer, or not 2xx), retried or not.
    pub failed_requests: AtomicU64,
}

impl WebhookCounters {
    /// The counters now, for `target`.
    pub fn read(&self, target: String) -> EventHookFigures {
        EventHookFigures {
            target,
            delivered: self.delivered.load(Ordering::Relaxed),
            overflowed: self.overflowed.load(Ordering::Relaxed),
            given_up: self.given_up.load(Ordering::Relaxed),
            failed_requests: self.failed_requests.load(Ordering::Relaxed),
        }
    }
}
