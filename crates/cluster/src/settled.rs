//! How far each shard's QoS 1/2 messages handed to the cluster have settled: sent on NATS core,
//! or kept by JetStream (its acknowledgement), or given up (JetStream refused or did not
//! answer). A shard holds the PUBACK / PUBREC of such a message until its number has settled
//! (`shard/cluster_acks.rs`), so a publisher is acknowledged once the message is kept for the
//! other nodes (docs/cluster.md, "Guarantees").

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use ring_runtime::{RuntimeControl, ShardId};

/// Settled numbers, one per shard; the shards read them at the end of each turn.
#[derive(Debug)]
pub struct Settled {
    per_shard: Vec<AtomicU64>,
    /// Wakes a shard whose number moved (set once the runtime runs).
    control: OnceLock<RuntimeControl>,
}

impl Settled {
    /// Nothing settled yet for `shards` shards.
    pub fn new(shards: usize) -> Self {
        Self {
            per_shard: (0..shards).map(|_| AtomicU64::new(0)).collect(),
            control: OnceLock::new(),
        }
    }

    /// Lets the cluster thread wake the shards.
    pub fn set_control(&self, control: RuntimeControl) {
        let _ = self.control.set(control);
    }

    /// Every number of `shard` up to `number` has settled (numbers settle in order).
    pub(super) fn settle(&self, shard: ShardId, number: u64) {
        if let Some(slot) = self.per_shard.get(shard.index()) {
            slot.fetch_max(number, Ordering::AcqRel);
        }
        self.wake(shard);
    }

    /// Makes `shard` look at its number now (also when NATS went down: it stops waiting).
    pub(super) fn wake(&self, shard: ShardId) {
        if let Some(control) = self.control.get() {
            control.wake(shard);
        }
    }

    /// Wakes every shard.
    pub(super) fn wake_all(&self) {
        for index in 0..self.per_shard.len() {
            self.wake(ShardId::new(index as u16));
        }
    }

    /// The highest number of `shard` settled so far.
    pub fn of(&self, shard: ShardId) -> u64 {
        self.per_shard
            .get(shard.index())
            .map_or(0, |slot| slot.load(Ordering::Acquire))
    }
}
