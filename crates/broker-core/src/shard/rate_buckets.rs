//! [`Throttle`]: each connection's publish-rate buckets (messages and bytes per second); `throttle.rs` pauses and resumes connections by them.

use super::{ArmedTimer, FastMap};
use crate::settings::PublishRates;
use ring_runtime::ConnId;
use std::time::{Duration, Instant};

/// Debt smaller than this is rounding, not debt.
pub(super) const EPSILON: f64 = 1e-9;

/// This shard's buckets, by connection.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    pub(super) buckets: FastMap<ConnId, Buckets>,
}

/// One connection's buckets.
#[derive(Debug)]
pub(super) struct Buckets {
    /// PUBLISH packets it may still send now (negative: debt).
    pub(super) messages: f64,
    /// PUBLISH bytes it may still send now (negative: debt).
    pub(super) bytes: f64,
    /// When the buckets were last refilled.
    pub(super) refilled: Instant,
    /// While its reading is paused: the timer that ends the pause.
    pub(super) resume: Option<ArmedTimer>,
}

impl Buckets {
    /// Full buckets: a second's worth of each limit.
    pub(super) fn full(rates: PublishRates, now: Instant) -> Self {
        Self {
            messages: rates.messages as f64,
            bytes: rates.bytes as f64,
            refilled: now,
            resume: None,
        }
    }

    /// Adds what the time since the last refill earned, up to a second's worth.
    pub(super) fn refill(&mut self, rates: PublishRates, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.messages = refilled(self.messages, rates.messages, elapsed);
        self.bytes = refilled(self.bytes, rates.bytes, elapsed);
    }

    pub(super) fn charge(&mut self, bytes: usize) {
        self.messages -= 1.0;
        self.bytes -= bytes as f64;
    }

    /// How long until no limited bucket is in debt; `None` when none is.
    pub(super) fn debt_wait(&self, rates: PublishRates) -> Option<Duration> {
        let wait = |tokens: f64, rate: u64| {
            if rate == 0 || tokens > -EPSILON {
                0.0
            } else {
                -tokens / rate as f64
            }
        };
        let secs = wait(self.messages, rates.messages).max(wait(self.bytes, rates.bytes));
        (secs > 0.0).then(|| Duration::from_secs_f64(secs))
    }
}

/// A bucket's tokens after `elapsed` seconds at `rate` per second (0: no limit, nothing owed).
pub(super) fn refilled(tokens: f64, rate: u64, elapsed: f64) -> f64 {
    if rate == 0 {
        return 0.0;
    }
    let burst = rate as f64;
    (tokens + elapsed * burst).min(burst)
}

impl Throttle {
    /// Whether `conn` waits for its publish budget (its reading is paused).
    pub(super) fn is_throttled(&self, conn: ConnId) -> bool {
        !self.buckets.is_empty()
            && self
                .buckets
                .get(&conn)
                .is_some_and(|bucket| bucket.resume.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATES: PublishRates = PublishRates {
        messages: 5,
        bytes: 1000,
    };

    #[test]
    fn a_burst_of_one_second_then_the_rate() {
        let start = Instant::now();
        let mut bucket = Buckets::full(RATES, start);
        for _ in 0..5 {
            bucket.charge(10);
            assert_eq!(bucket.debt_wait(RATES), None, "within the burst");
        }
        bucket.charge(10);
        assert_eq!(bucket.debt_wait(RATES), Some(Duration::from_millis(200)));
        bucket.refill(RATES, start + Duration::from_millis(200));
        assert_eq!(bucket.debt_wait(RATES), None, "paid after 1/rate");
    }

    #[test]
    fn bytes_debt_waits_for_the_bytes_rate() {
        let start = Instant::now();
        let mut bucket = Buckets::full(RATES, start);
        bucket.charge(3000);
        assert_eq!(bucket.debt_wait(RATES), Some(Duration::from_secs(2)));
        bucket.refill(RATES, start + Duration::from_secs(60));
        assert_eq!(bucket.bytes, 1000.0, "refills to one second's worth only");
    }

    #[test]
    fn an_unlimited_bucket_owes_nothing() {
        let rates = PublishRates {
            messages: 0,
            bytes: 100,
        };
        let start = Instant::now();
        let mut bucket = Buckets::full(rates, start);
        for _ in 0..1000 {
            bucket.charge(0);
        }
        bucket.refill(rates, start);
        assert_eq!(bucket.debt_wait(rates), None);
    }
}
