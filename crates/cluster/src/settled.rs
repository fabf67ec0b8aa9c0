//! How far each shard's QoS 1/2 messages handed to the cluster have settled: kept by
//! JetStream (its acknowledgement, after publishing again as often as it takes), sent on NATS
//! core where nothing keeps them, or given up (JetStream did not keep it within
//! `cluster.ack_timeout_ms`: the number is also marked failed). A shard holds the PUBACK /
//! PUBREC of such a message until its number has settled (`shard/cluster_acks.rs`), and refuses
//! it when the number failed, so a publisher is acknowledged only once the message is kept for
//! the other nodes (docs/cluster.md, "Guarantees").

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use ring_runtime::{RuntimeControl, ShardId};

/// Settled numbers, one per shard; the shards read them at the end of each turn.
#[derive(Debug)]
pub struct Settled {
    per_shard: Vec<AtomicU64>,
    /// The highest number handed to the cluster per shard (one above the settled one: the
    /// shard still waits for something).
    handed: Vec<AtomicU64>,
    /// Numbers given up, in order, until their shard takes them.
    failed: Vec<Mutex<VecDeque<u64>>>,
    /// Wakes a shard whose number moved (set once the runtime runs).
    control: OnceLock<RuntimeControl>,
}

impl Settled {
    /// Nothing settled yet for `shards` shards.
    pub fn new(shards: usize) -> Self {
        Self {
            per_shard: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            handed: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            failed: (0..shards).map(|_| Mutex::default()).collect(),
            control: OnceLock::new(),
        }
    }

    /// Lets the cluster thread wake the shards.
    pub fn set_control(&self, control: RuntimeControl) {
        let _ = self.control.set(control);
    }

    /// `number` of `shard` was handed to the cluster.
    pub(super) fn handed(&self, shard: ShardId, number: u64) {
        if let Some(slot) = self.handed.get(shard.index()) {
            slot.fetch_max(number, Ordering::AcqRel);
        }
    }

    /// Every number of `shard` up to `number` has settled (numbers settle in order).
    pub(super) fn settle(&self, shard: ShardId, number: u64) {
        if let Some(slot) = self.per_shard.get(shard.index()) {
            slot.fetch_max(number, Ordering::AcqRel);
        }
        self.wake(shard);
    }

    /// `number` of `shard` was given up: its acknowledgement is refused (settle it after).
    pub(super) fn fail(&self, shard: ShardId, number: u64) {
        if let Some(failed) = self.failed.get(shard.index()) {
            lock(failed).push_back(number);
        }
    }

    /// Whether `number` of `shard` was given up; forgets it and every failed number below it
    /// (a shard asks in increasing order).
    pub fn take_failed(&self, shard: ShardId, number: u64) -> bool {
        let Some(failed) = self.failed.get(shard.index()) else {
            return false;
        };
        let mut failed = lock(failed);
        while failed.front().is_some_and(|&first| first < number) {
            failed.pop_front();
        }
        let hit = failed.front() == Some(&number);
        if hit {
            failed.pop_front();
        }
        hit
    }

    /// Makes `shard` look at its number now.
    pub(super) fn wake(&self, shard: ShardId) {
        if let Some(control) = self.control.get() {
            control.wake(shard);
        }
    }

    /// Wakes every shard that waits for a number not settled yet (its held acknowledgements
    /// may have waited past `cluster.ack_timeout_ms`).
    pub(super) fn wake_waiting(&self) {
        for (index, handed) in self.handed.iter().enumerate() {
            let shard = ShardId::new(index as u16);
            if handed.load(Ordering::Acquire) > self.of(shard) {
                self.wake(shard);
            }
        }
    }

    /// The highest number of `shard` settled so far.
    pub fn of(&self, shard: ShardId) -> u64 {
        self.per_shard
            .get(shard.index())
            .map_or(0, |slot| slot.load(Ordering::Acquire))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_number_is_taken_once_and_older_ones_are_forgotten() {
        let settled = Settled::new(1);
        let shard = ShardId::new(0);
        for number in [2, 5, 7] {
            settled.fail(shard, number);
        }
        assert!(!settled.take_failed(shard, 1));
        assert!(
            !settled.take_failed(shard, 4),
            "2 is forgotten, 4 never failed"
        );
        assert!(settled.take_failed(shard, 5));
        assert!(!settled.take_failed(shard, 5), "taken once");
        assert!(settled.take_failed(shard, 7));
    }
}
