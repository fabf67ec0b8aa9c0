//! Byte budgets shared by every shard of a broker (bytes held in queues; the broker also bounds
//! partial frames with one). Each thread charges and releases against a credit of its own: bytes
//! it reserved from the shared count in chunks and has not used yet. A queue that takes a copy
//! and gives it back for every message of a QoS 1 fan-out (a window full, every copy queued a
//! moment) then writes a cache line only its own core writes, and the shared count moves once
//! per chunk instead of twice per copy on every core.
//!
//! The limit stays exact: a charge the shared count refuses first takes every thread's unused
//! credit back, then tries once more for just its bytes. A thread's credit is at most two
//! chunks (a release beyond that gives the surplus back), and a chunk is at most 1/256 of the
//! limit, so what threads hold unused is small even before it is taken back.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// Credit slots per budget: threads take them in turn (a thread past this many shares one,
/// which stays correct, only contended).
const CREDIT_SLOTS: usize = 64;

/// The largest chunk a thread reserves at once.
const MAX_CHUNK: u64 = 64 * 1024;

/// Bytes in use against a fixed limit, charged and released by any thread.
#[derive(Debug)]
pub struct ByteBudget {
    /// Bytes charged plus the credit threads hold.
    reserved: CachePadded<AtomicU64>,
    /// Bytes given back to `reserved` since [`ByteBudget::take_released`] last reported them.
    released: CachePadded<AtomicU64>,
    /// Each thread's unused credit, by its slot ([`credit_slot`]).
    credits: Box<[CachePadded<AtomicU64>]>,
    chunk: u64,
    limit: u64,
}

impl ByteBudget {
    /// An empty budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            reserved: CachePadded::new(AtomicU64::new(0)),
            released: CachePadded::new(AtomicU64::new(0)),
            credits: (0..CREDIT_SLOTS)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            chunk: (limit / 256).min(MAX_CHUNK),
            limit,
        }
    }

    /// Charges `bytes` when they fit within the limit; otherwise charges nothing and returns
    /// false.
    pub fn try_charge(&self, bytes: u64) -> bool {
        let credit = self.credit();
        if take_credit(credit, bytes) {
            return true;
        }
        if self.chunk > 0 && self.reserve(bytes.saturating_add(self.chunk)) {
            credit.fetch_add(self.chunk, Ordering::Relaxed);
            return true;
        }
        if self.reserve(bytes) {
            return true;
        }
        self.reclaim_credits();
        self.reserve(bytes)
    }

    /// Charges `bytes` whatever the limit (a message put back where it was just taken from).
    pub fn charge(&self, bytes: u64) {
        if !take_credit(self.credit(), bytes) {
            self.reserved.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Gives back `bytes` charged before (by any thread).
    pub fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let credit = self.credit();
        let held = credit.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if held > 2 * self.chunk {
            let surplus = held - self.chunk;
            if take_credit(credit, surplus) {
                self.give_back(surplus);
            }
        }
    }

    /// Whether at least `threshold` bytes (more than 0) were released since the last time this
    /// returned true; resets the count when it does (one caller wins a race). Bytes a thread
    /// keeps as credit count once they go back to the shared count.
    pub fn take_released(&self, threshold: u64) -> bool {
        threshold > 0
            && self.released.load(Ordering::Relaxed) >= threshold
            && self.released.swap(0, Ordering::Relaxed) >= threshold
    }

    /// Bytes charged now (exact while no thread charges or releases).
    pub fn used(&self) -> u64 {
        let unused: u64 = self.credits.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        self.reserved.load(Ordering::Relaxed).saturating_sub(unused)
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Adds `bytes` to the shared count if the limit allows.
    fn reserve(&self, bytes: u64) -> bool {
        let before = self.reserved.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) <= self.limit {
            return true;
        }
        self.reserved.fetch_sub(bytes, Ordering::Relaxed);
        false
    }

    /// Takes every thread's unused credit back into the shared count (near the limit). A slot
    /// holding none is only read, so a full budget refusing charge after charge does not write
    /// every thread's line each time.
    fn reclaim_credits(&self) {
        for credit in self.credits.iter() {
            if credit.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let unused = credit.swap(0, Ordering::Relaxed);
            if unused > 0 {
                self.give_back(unused);
            }
        }
    }

    fn give_back(&self, bytes: u64) {
        self.reserved.fetch_sub(bytes, Ordering::Relaxed);
        self.released.fetch_add(bytes, Ordering::Relaxed);
    }

    fn credit(&self) -> &AtomicU64 {
        &self.credits[credit_slot() % self.credits.len()]
    }
}

/// Takes `bytes` from `credit` if it holds that many.
fn take_credit(credit: &AtomicU64, bytes: u64) -> bool {
    credit
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
            held.checked_sub(bytes)
        })
        .is_ok()
}

/// This thread's credit slot, assigned in turn on first use.
fn credit_slot() -> usize {
    static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
    }
    SLOT.with(|slot| *slot)
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
    fn charges_from_many_threads_never_exceed_the_limit_and_reach_it() {
        let budget = ByteBudget::new(1000);
        let granted: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| scope.spawn(|| (0..1000).filter(|_| budget.try_charge(1)).count()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap() as u64).sum()
        });
        assert!(granted <= 1000, "granted {granted}");
        assert_eq!(budget.used(), granted);
        let mut more = 0;
        while budget.try_charge(1) {
            more += 1;
        }
        assert_eq!(
            granted + more,
            1000,
            "credit left unused by other threads is taken back"
        );
    }

    #[test]
    fn a_thread_charges_its_credit_without_the_shared_count() {
        let budget = ByteBudget::new(1 << 30);
        assert_eq!(budget.chunk, MAX_CHUNK);
        assert!(budget.try_charge(100));
        let shared = budget.reserved.load(Ordering::Relaxed);
        assert_eq!(
            shared,
            100 + MAX_CHUNK,
            "one chunk reserved beside the charge"
        );
        assert!(budget.try_charge(100));
        budget.release(150);
        assert_eq!(
            budget.reserved.load(Ordering::Relaxed),
            shared,
            "no shared write"
        );
        assert_eq!(budget.used(), 50);
        assert!(!budget.take_released(1), "nothing went back yet");
    }

    #[test]
    fn credit_beyond_two_chunks_goes_back_and_is_reported() {
        let budget = ByteBudget::new(1 << 30);
        assert!(budget.try_charge(10 * MAX_CHUNK));
        budget.release(10 * MAX_CHUNK);
        assert_eq!(budget.used(), 0);
        assert_eq!(
            budget.reserved.load(Ordering::Relaxed),
            MAX_CHUNK,
            "the thread keeps one chunk"
        );
        assert!(budget.take_released(10 * MAX_CHUNK));
    }

    #[test]
    fn another_threads_unused_credit_is_taken_back_at_the_limit() {
        let budget = ByteBudget::new(1024);
        assert_eq!(budget.chunk, 4);
        std::thread::scope(|scope| scope.spawn(|| assert!(budget.try_charge(1))).join()).unwrap();
        assert_eq!(budget.reserved.load(Ordering::Relaxed), 5);
        assert!(budget.try_charge(1023));
        assert_eq!(budget.used(), 1024);
        assert!(!budget.try_charge(1));
    }

    #[test]
    fn an_unconditional_charge_may_pass_the_limit() {
        let budget = ByteBudget::new(100);
        assert!(budget.try_charge(100));
        budget.charge(10);
        assert_eq!(budget.used(), 110);
        budget.release(110);
        assert_eq!(budget.used(), 0);
        assert!(budget.try_charge(100));
    }
}
