//! Byte budgets shared by every shard of a broker (bytes held in offline queues; the broker also
//! bounds partial frames with one). Each is one padded atomic, touched only when such bytes are
//! taken or given back (a message queued or dequeued), never per packet.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

/// Bytes in use against a fixed limit, charged and released by any shard.
#[derive(Debug)]
pub struct ByteBudget {
    used: CachePadded<AtomicU64>,
    /// Bytes released since [`ByteBudget::take_released`] last reported them.
    released: CachePadded<AtomicU64>,
    limit: u64,
}

impl ByteBudget {
    /// An empty budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            used: CachePadded::new(AtomicU64::new(0)),
            released: CachePadded::new(AtomicU64::new(0)),
            limit,
        }
    }

    /// Charges `bytes` when they fit within the limit; otherwise charges nothing and returns
    /// false.
    pub fn try_charge(&self, bytes: u64) -> bool {
        let before = self.used.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) <= self.limit {
            return true;
        }
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        false
    }

    /// Charges `bytes` whatever the limit (a message put back where it was just taken from).
    pub fn charge(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Gives back `bytes` charged before.
    pub fn release(&self, bytes: u64) {
        if bytes > 0 {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            self.released.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Whether at least `threshold` bytes (more than 0) were released since the last time this
    /// returned true; resets the count when it does (one caller wins a race).
    pub fn take_released(&self, threshold: u64) -> bool {
        threshold > 0
            && self.released.load(Ordering::Relaxed) >= threshold
            && self.released.swap(0, Ordering::Relaxed) >= threshold
    }

    /// Bytes charged now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_up_to_the_limit_and_releases() {
        let budget = ByteBudget::new(100);
        assert!(budget.try_charge(60));
        assert!(!budget.try_charge(41), "over the limit: nothing charged");
        assert_eq!(budget.used(), 60);
        assert!(budget.try_charge(40));
        budget.release(60);
        assert_eq!(budget.used(), 40);
        assert_eq!(budget.limit(), 100);
    }

    #[test]
    fn released_bytes_are_reported_once_past_the_threshold() {
        let budget = ByteBudget::new(100);
        assert!(budget.try_charge(100));
        budget.release(30);
        assert!(!budget.take_released(50));
        budget.release(30);
        assert!(budget.take_released(50));
        assert!(!budget.take_released(50), "reset once reported");
        assert!(!budget.take_released(0), "0 never reports");
    }

    #[test]
    fn charges_from_many_threads_never_exceed_the_limit() {
        let budget = ByteBudget::new(1000);
        let granted: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..1000).filter(|_| budget.try_charge(1)).count()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap() as u64).sum()
        });
        assert_eq!(granted, 1000);
        assert_eq!(budget.used(), 1000);
    }
}
