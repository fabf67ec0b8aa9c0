//! A fixed-bucket latency histogram written by one thread (relaxed load and store, no locked
//! instruction) and read by any (the operations HTTP listener's `/metrics`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::ShardCounters;

/// Upper bounds of the buckets, from 50 µs to 1 s; a last, unbounded bucket holds the rest.
pub const BOUNDS: [Duration; 14] = [
    Duration::from_micros(50),
    Duration::from_micros(100),
    Duration::from_micros(250),
    Duration::from_micros(500),
    Duration::from_millis(1),
    Duration::from_micros(2_500),
    Duration::from_millis(5),
    Duration::from_millis(10),
    Duration::from_millis(25),
    Duration::from_millis(50),
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
];

/// [`BOUNDS`] in nanoseconds.
const BOUND_NANOS: [u64; BOUNDS.len()] = {
    let mut nanos = [0; BOUNDS.len()];
    let mut i = 0;
    while i < BOUNDS.len() {
        nanos[i] = BOUNDS[i].as_nanos() as u64;
        i += 1;
    }
    nanos
};

/// Observations per bucket (not cumulative) and their sum.
#[derive(Debug, Default)]
pub struct Histogram {
    /// `buckets[i]`: observations in `(BOUNDS[i-1], BOUNDS[i]]`; the last one above 1 s.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    /// Sum of the observations, in nanoseconds.
    sum_ns: AtomicU64,
}

/// A histogram read at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HistogramSnapshot {
    /// Observations per bucket, not cumulative; the last is above every bound.
    pub buckets: [u64; BOUNDS.len() + 1],
    /// Sum of the observations, in nanoseconds.
    pub sum_ns: u64,
}

impl Histogram {
    /// Records one observation. Only the histogram's owner calls it (single writer).
    pub fn record(&self, value: Duration) {
        self.record_nanos(u64::try_from(value.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records one observation in nanoseconds: one bucket add, plus one add to the sum when it
    /// is not zero (a copy written in the turn its PUBLISH arrived measures zero on the turn
    /// clock, and finds its bucket at the first comparison).
    #[inline]
    pub fn record_nanos(&self, nanos: u64) {
        let index = BOUND_NANOS
            .iter()
            .position(|bound| nanos <= *bound)
            .unwrap_or(BOUNDS.len());
        ShardCounters::add(&self.buckets[index], 1);
        if nanos != 0 {
            ShardCounters::add(&self.sum_ns, nanos);
        }
    }

    /// The counts now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut snapshot = HistogramSnapshot {
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
            ..HistogramSnapshot::default()
        };
        for (out, bucket) in snapshot.buckets.iter_mut().zip(&self.buckets) {
            *out = bucket.load(Ordering::Relaxed);
        }
        snapshot
    }
}

impl HistogramSnapshot {
    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Adds `other`'s counts to these (histograms of several shards, summed).
    pub fn merge(&mut self, other: &Self) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets) {
            *mine += theirs;
        }
        self.sum_ns += other.sum_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let h = Histogram::default();
        h.record(Duration::ZERO);
        h.record(Duration::from_micros(50));
        h.record(Duration::from_micros(51));
        h.record(Duration::from_secs(2));
        let s = h.snapshot();
        assert_eq!(s.buckets[0], 2, "zero and exactly 50 µs");
        assert_eq!(s.buckets[1], 1);
        assert_eq!(s.buckets[BOUNDS.len()], 1, "above 1 s");
        assert_eq!(s.count(), 4);
        assert_eq!(s.sum_ns, 2_000_101_000);
    }

    #[test]
    fn merge_adds_counts_and_sums() {
        let a = Histogram::default();
        let b = Histogram::default();
        a.record(Duration::from_millis(3));
        b.record(Duration::from_millis(3));
        let mut total = a.snapshot();
        total.merge(&b.snapshot());
        assert_eq!(total.buckets[6], 2);
        assert_eq!(total.sum_ns, 6_000_000);
    }
}
