//! Reconnect delays: doubling from `reconnect_min` to `reconnect_max`, each drawn at random
//! between half and all of the current step, so bridges restarted together spread out.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The delays before successive reconnect attempts.
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    step: Duration,
    random: u64,
}

impl Backoff {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Self {
            min,
            max,
            step: min,
            random: seed | 1,
        }
    }

    /// The next delay; the step doubles, up to the maximum.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let step = self.step;
        self.step = (step * 2).min(self.max);
        let half = step / 2;
        let jitter = (self.next_random() % 1_000) as u32;
        half + half * jitter / 1_000
    }

    /// The current step (the longest the next delay can be).
    pub(crate) fn step(&self) -> Duration {
        self.step
    }

    /// Back to the minimum (after a connection that held).
    pub(crate) fn reset(&mut self) {
        self.step = self.min;
    }

    /// xorshift64: enough to spread delays, no security asked of it.
    fn next_random(&mut self) -> u64 {
        let mut x = self.random;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random = x;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_maximum_with_jitter() {
        let (min, max) = (Duration::from_millis(100), Duration::from_millis(1_000));
        let mut backoff = Backoff::new(min, max);
        let mut steps = Vec::new();
        for _ in 0..8 {
            let step = backoff.step();
            let delay = backoff.next_delay();
            assert!(
                delay >= step / 2 && delay <= step,
                "{delay:?} within {step:?}"
            );
            steps.push(step.as_millis());
        }
        assert_eq!(steps, [100, 200, 400, 800, 1000, 1000, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.step(), min);
    }
}
