//! Counters shared by the load generator's threads, order tracking and latency histograms.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;

/// Declares the counters once: the per-thread block and its summed snapshot.
macro_rules! counters {
    ($($name:ident: $doc:literal),* $(,)?) => {
        /// One thread's counters (written by that thread only).
        #[derive(Debug, Default)]
        pub struct Counters {
            $(#[doc = $doc] pub $name: AtomicU64,)*
        }

        /// The sum over all threads.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
        pub struct Totals {
            $(#[doc = $doc] pub $name: u64,)*
        }

        impl Totals {
            fn add(&mut self, c: &Counters) {
                $(self.$name += c.$name.load(Ordering::Relaxed);)*
            }
        }
    };
}

counters! {
    connected: "Clients whose CONNACK accepted them.",
    sessions_present: "CONNACKs with Session Present set (a persistent session resumed).",
    connect_failures: "Connections refused or failed.",
    ready: "Clients ready (subscribed, or connected for publishers).",
    sent: "PUBLISH packets sent.",
    acked: "QoS 1/2 PUBLISH flows completed (PUBACK or PUBCOMP).",
    received: "PUBLISH packets received by subscribers.",
    duplicates: "Received messages seen before by the same subscriber.",
    out_of_order: "Received messages older than one already received from the same publisher.",
    disconnects: "Connections the broker closed or that failed after connecting.",
    publishers_done: "Publishers that reached their message limit.",
}

impl Counters {
    /// Adds `n` (single writer: no locked instruction needed).
    pub fn bump(counter: &AtomicU64, n: u64) {
        counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }
}

/// Every thread's counters.
#[derive(Debug)]
pub struct Stats {
    threads: Box<[CachePadded<Counters>]>,
    /// Every client of the run is ready (or failed to connect): set by the watching thread.
    all_ready: AtomicBool,
}

impl Stats {
    /// Counters for `threads` threads.
    pub fn new(threads: usize) -> Self {
        Self {
            threads: (0..threads.max(1))
                .map(|_| CachePadded::new(Counters::default()))
                .collect(),
            all_ready: AtomicBool::new(false),
        }
    }

    /// Every client of the run is ready (or failed to connect).
    pub fn all_ready(&self) -> bool {
        self.all_ready.load(Ordering::Relaxed)
    }

    /// Marks every client of the run ready.
    pub fn set_all_ready(&self) {
        self.all_ready.store(true, Ordering::Relaxed);
    }

    /// Thread `index`'s block.
    pub fn thread(&self, index: usize) -> &Counters {
        &self.threads[index]
    }

    /// The sum now.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for c in self.threads.iter() {
            t.add(c);
        }
        t
    }
}

/// A latency histogram in microseconds, 1 µs to 60 s, 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("invariant: valid static bounds")
}

/// What one received sequence number means for one publisher's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Newer than anything before.
    InOrder,
    /// Older than the newest, first time seen.
    Late,
    /// Seen before.
    Duplicate,
}

/// Tracks one publisher's sequence numbers at one subscriber: the newest, and which of the 64
/// before it arrived (older than that counts as late).
#[derive(Debug, Clone, Copy, Default)]
pub struct OrderTracker {
    newest: Option<u32>,
    window: u64,
}

impl OrderTracker {
    /// Records `seq`.
    pub fn observe(&mut self, seq: u32) -> Seen {
        let Some(newest) = self.newest else {
            self.newest = Some(seq);
            self.window = 1;
            return Seen::InOrder;
        };
        if seq > newest {
            let shift = seq - newest;
            self.window = if shift >= 64 { 0 } else { self.window << shift };
            self.window |= 1;
            self.newest = Some(seq);
            return Seen::InOrder;
        }
        let age = newest - seq;
        if age >= 64 {
            return Seen::Late;
        }
        let bit = 1u64 << age;
        if self.window & bit != 0 {
            return Seen::Duplicate;
        }
        self.window |= bit;
        Seen::Late
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_tracker_tells_late_from_duplicate() {
        let mut t = OrderTracker::default();
        assert_eq!(t.observe(0), Seen::InOrder);
        assert_eq!(t.observe(2), Seen::InOrder);
        assert_eq!(t.observe(1), Seen::Late);
        assert_eq!(t.observe(1), Seen::Duplicate);
        assert_eq!(t.observe(2), Seen::Duplicate);
        assert_eq!(t.observe(100), Seen::InOrder);
        assert_eq!(t.observe(3), Seen::Late);
    }

    #[test]
    fn totals_sum_threads() {
        let s = Stats::new(2);
        Counters::bump(&s.thread(0).sent, 3);
        Counters::bump(&s.thread(1).sent, 4);
        assert_eq!(s.totals().sent, 7);
    }
}
