//! Slow subscribers (`[slow_subscribers]`, docs/operations.md): each shard keeps a small book of
//! the subscribers whose deliveries took longer than the threshold (from the PUBLISH's turn to
//! the subscriber's PUBACK or PUBREC, or to the write for QoS 0) and of those that lost
//! messages to their queue's bound or a full send queue; the admin API and `/metrics` rank them
//! (by latency, by drops, and by queue depth from a walk over the sessions), a bounded top-N
//! rather than a series per client. A delivery under the threshold costs one comparison.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::settings::SlowSubscriberSettings;

/// How many subscribers the book holds per ranked place (the rest are evicted, least recently
/// slow first).
const HELD_PER_PLACE: usize = 8;

/// The least time between two evictions. While more subscribers are slow than the book holds,
/// each note for one outside it would otherwise scan the book for the stalest entry and swap
/// it out: with 500 subscribers behind, that scan on every acknowledgement took 10-14 % of the
/// broker's perf samples (docs/bench/history/issue-53-s43-run.md). Newcomers now take a place
/// at most once a millisecond; the others' notes wait for their next slow delivery.
const EVICTION_SPACING: Duration = Duration::from_millis(1);

/// One slow subscriber as a shard saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlowEntry {
    /// Its last delivery over the threshold, in nanoseconds.
    pub last_latency_ns: u64,
    /// Its slowest delivery.
    pub max_latency_ns: u64,
    /// Deliveries over the threshold.
    pub slow_deliveries: u64,
    /// Messages dropped for it (queue bound, full send queue).
    pub dropped: u64,
}

/// A ranked subscriber, for the admin API and `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowRow {
    pub client_id: String,
    pub entry: SlowEntry,
    /// Seconds since it was last slow or dropping.
    pub idle_seconds: u64,
}

/// A subscriber's queue, for the ranking by depth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRow {
    pub client_id: String,
    /// Copies waiting in its queue (memory and disk).
    pub queued: u64,
    /// Copies sent and not yet acknowledged.
    pub inflight: u64,
}

/// One shard's rankings (each at most `top`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlowReport {
    pub by_latency: Vec<SlowRow>,
    pub by_drops: Vec<SlowRow>,
    pub by_queue: Vec<QueueRow>,
}

impl SlowReport {
    /// Every shard's rankings merged into one, each cut to `top`.
    pub fn merge(reports: impl IntoIterator<Item = SlowReport>, top: usize) -> SlowReport {
        let mut merged = SlowReport::default();
        for report in reports {
            merged.by_latency.extend(report.by_latency);
            merged.by_drops.extend(report.by_drops);
            merged.by_queue.extend(report.by_queue);
        }
        merged.rank(top);
        merged
    }

    fn rank(&mut self, top: usize) {
        self.by_latency
            .sort_by(|a, b| latency_key(a).cmp(&latency_key(b)));
        self.by_latency.truncate(top);
        self.by_drops.retain(|r| r.entry.dropped > 0);
        self.by_drops
            .sort_by(|a, b| drops_key(a).cmp(&drops_key(b)));
        self.by_drops.truncate(top);
        self.by_queue.retain(|r| r.queued > 0);
        self.by_queue
            .sort_by(|a, b| queue_key(a).cmp(&queue_key(b)));
        self.by_queue.truncate(top);
    }
}

/// The rankings' orders: the largest figure first, ties by client id (borrowed: a
/// comparison copies nothing).
fn latency_key(row: &SlowRow) -> (Reverse<u64>, &str) {
    (Reverse(row.entry.max_latency_ns), &row.client_id)
}

fn drops_key(row: &SlowRow) -> (Reverse<u64>, &str) {
    (Reverse(row.entry.dropped), &row.client_id)
}

fn queue_key(row: &QueueRow) -> (Reverse<u64>, &str) {
    (Reverse(row.queued), &row.client_id)
}

/// A shard's slow subscribers.
#[derive(Debug)]
pub struct SlowBook {
    settings: SlowSubscriberSettings,
    threshold_ns: u64,
    entries: HashMap<Box<str>, (SlowEntry, Instant), ahash::RandomState>,
    /// When the book, full, may next evict its stalest entry for a newcomer.
    next_eviction: Option<Instant>,
}

impl SlowBook {
    pub fn new(settings: SlowSubscriberSettings) -> Self {
        let threshold_ns = u64::try_from(settings.threshold.as_nanos()).unwrap_or(u64::MAX);
        Self {
            settings,
            threshold_ns,
            entries: HashMap::default(),
            next_eviction: None,
        }
    }

    /// How many each ranking keeps (0: off).
    pub fn top(&self) -> usize {
        self.settings.top
    }

    /// Whether a delivery that took `latency_ns` is slow (the hot path's one comparison).
    #[inline]
    pub fn is_slow(&self, latency_ns: u64) -> bool {
        latency_ns >= self.threshold_ns && self.settings.top > 0
    }

    /// `client_id` had a delivery of `latency_ns` (over the threshold).
    pub fn note_latency(&mut self, client_id: &str, latency_ns: u64, now: Instant) {
        let Some(entry) = self.entry(client_id, now) else {
            return;
        };
        entry.last_latency_ns = latency_ns;
        entry.max_latency_ns = entry.max_latency_ns.max(latency_ns);
        entry.slow_deliveries += 1;
    }

    /// `n` messages for `client_id` were dropped.
    pub fn note_drops(&mut self, client_id: &str, n: u64, now: Instant) {
        if self.settings.top == 0 || n == 0 {
            return;
        }
        if let Some(entry) = self.entry(client_id, now) {
            entry.dropped += n;
        }
    }

    /// `client_id`'s entry, seen now: the one it has, or a new one (in place of the stalest
    /// when the book is full, at most once per [`EVICTION_SPACING`]); `None` when the book is
    /// full and the last eviction was too recent.
    fn entry(&mut self, client_id: &str, now: Instant) -> Option<&mut SlowEntry> {
        if !self.entries.contains_key(client_id) {
            if !self.make_room(now) {
                return None;
            }
            self.entries
                .insert(Box::from(client_id), (SlowEntry::default(), now));
        }
        let slot = self.entries.get_mut(client_id)?;
        slot.1 = now;
        Some(&mut slot.0)
    }

    /// Whether a newcomer fits: the book has room, or its stalest entry was evicted now.
    fn make_room(&mut self, now: Instant) -> bool {
        let capacity = self.settings.top.saturating_mul(HELD_PER_PLACE).max(1);
        if self.entries.len() < capacity {
            return true;
        }
        if self.next_eviction.is_some_and(|due| now < due) {
            return false;
        }
        self.next_eviction = Some(now + EVICTION_SPACING);
        let stalest = (self.entries.iter())
            .min_by_key(|(_, (_, seen))| *seen)
            .map(|(id, _)| id.clone());
        if let Some(id) = stalest {
            self.entries.remove(&id);
        }
        true
    }

    /// Forgets the subscribers neither slow nor dropping for `settings.expire`.
    pub fn expire(&mut self, now: Instant) {
        let expire = self.settings.expire;
        self.entries
            .retain(|_, (_, seen)| now.saturating_duration_since(*seen) < expire);
    }

    /// This shard's rankings by latency and drops (queue depth is the caller's walk).
    pub fn report(&self, now: Instant) -> SlowReport {
        let rows: Vec<SlowRow> = self
            .entries
            .iter()
            .map(|(id, (entry, seen))| SlowRow {
                client_id: id.to_string(),
                entry: *entry,
                idle_seconds: now.saturating_duration_since(*seen).as_secs(),
            })
            .collect();
        let mut report = SlowReport {
            by_latency: rows
                .iter()
                .filter(|r| r.entry.slow_deliveries > 0)
                .cloned()
                .collect(),
            by_drops: rows,
            by_queue: Vec::new(),
        };
        report.rank(self.settings.top);
        report
    }
}

/// Nanoseconds as whole milliseconds, for reports.
pub fn millis(nanos: u64) -> u64 {
    Duration::from_nanos(nanos).as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(top: usize) -> SlowBook {
        SlowBook::new(SlowSubscriberSettings {
            threshold: Duration::from_millis(100),
            top,
            expire: Duration::from_secs(10),
        })
    }

    #[test]
    fn only_deliveries_over_the_threshold_are_slow() {
        let book = book(3);
        assert!(!book.is_slow(99_999_999));
        assert!(book.is_slow(100_000_000));
        assert!(!self::book(0).is_slow(u64::MAX), "top 0 turns it off");
    }

    #[test]
    fn rankings_keep_the_slowest_and_the_most_dropping() {
        let mut book = book(2);
        let now = Instant::now();
        book.note_latency("a", 200_000_000, now);
        book.note_latency("b", 900_000_000, now);
        book.note_latency("c", 300_000_000, now);
        book.note_drops("c", 5, now);
        book.note_drops("a", 7, now);
        let report = book.report(now);
        let ids = |rows: &[SlowRow]| rows.iter().map(|r| r.client_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&report.by_latency), ["b", "c"]);
        assert_eq!(ids(&report.by_drops), ["a", "c"]);
        assert_eq!(report.by_latency[0].entry.slow_deliveries, 1);
    }

    #[test]
    fn the_book_is_bounded_and_forgets_the_quiet() {
        let mut book = book(1);
        let start = Instant::now();
        for i in 0..20u64 {
            book.note_drops(&format!("c{i}"), 1, start + Duration::from_millis(i));
        }
        assert_eq!(
            book.entries.len(),
            HELD_PER_PLACE,
            "evicts the stalest beyond its bound"
        );
        assert!(book.entries.contains_key("c19") && !book.entries.contains_key("c0"));
        book.expire(start + Duration::from_secs(11));
        assert!(book.entries.is_empty());
    }

    /// While more subscribers are slow than the book holds, newcomers take the stalest place at
    /// most once per spacing; the subscribers in the book are still noted every time.
    #[test]
    fn a_full_book_evicts_at_most_once_per_spacing() {
        let mut book = book(1);
        let start = Instant::now();
        for i in 0..HELD_PER_PLACE {
            book.note_latency(&format!("in{i}"), 200_000_000, start);
        }
        book.note_latency("first", 300_000_000, start);
        book.note_latency("second", 400_000_000, start + EVICTION_SPACING / 2);
        assert!(book.entries.contains_key("first"), "an eviction was due");
        assert!(!book.entries.contains_key("second"), "too soon after it");
        book.note_latency("first", 500_000_000, start + EVICTION_SPACING / 2);
        assert_eq!(
            book.entries["first"].0.slow_deliveries, 2,
            "members are noted"
        );
        book.note_latency("second", 400_000_000, start + EVICTION_SPACING);
        assert!(book.entries.contains_key("second"), "a spacing later");
        assert_eq!(book.entries.len(), HELD_PER_PLACE);
    }

    #[test]
    fn merged_reports_rank_across_shards() {
        let row = |id: &str, max: u64| SlowRow {
            client_id: id.into(),
            entry: SlowEntry {
                max_latency_ns: max,
                slow_deliveries: 1,
                ..SlowEntry::default()
            },
            idle_seconds: 0,
        };
        let one = SlowReport {
            by_latency: vec![row("a", 5)],
            ..SlowReport::default()
        };
        let two = SlowReport {
            by_latency: vec![row("b", 9), row("c", 1)],
            by_queue: vec![QueueRow {
                client_id: "q".into(),
                queued: 3,
                inflight: 1,
            }],
            ..SlowReport::default()
        };
        let merged = SlowReport::merge([one, two], 2);
        let ids: Vec<_> = merged
            .by_latency
            .iter()
            .map(|r| r.client_id.as_str())
            .collect();
        assert_eq!(ids, ["b", "a"]);
        assert_eq!(merged.by_queue.len(), 1);
    }
}
