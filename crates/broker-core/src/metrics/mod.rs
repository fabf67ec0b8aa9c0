//! Broker counters for `$SYS/broker/...` and the operations listener's `/metrics`: one padded
//! block per shard, written only by its shard (relaxed stores, no contended cache line), summed
//! when `$SYS` is published or `/metrics` is scraped.

mod detail;
pub mod histogram;
mod refusal;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

pub use detail::{DropReason, Listener, PerQos, ShardDetail, qos_index};
pub use histogram::{Histogram, HistogramSnapshot};
pub use refusal::Refusal;

/// Declares the counter names once: the per-shard block, its snapshot and the sum.
macro_rules! counters {
    ($($name:ident: $doc:literal),* $(,)?) => {
        /// One shard's counters. Each is written by its own shard only.
        #[derive(Debug, Default)]
        pub struct ShardCounters {
            $(#[doc = $doc] pub $name: AtomicU64,)*
        }

        /// A point-in-time sum of every shard's counters.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Snapshot {
            $(#[doc = $doc] pub $name: u64,)*
        }

        impl Snapshot {
            fn add(&mut self, c: &ShardCounters) {
                $(self.$name += c.$name.load(Ordering::Relaxed);)*
            }
        }
    };
}

counters! {
    clients_connected: "Clients connected now (gauge).",
    clients_total: "Sessions known now, connected or not (gauge).",
    messages_received: "PUBLISH packets received from clients.",
    messages_sent: "PUBLISH packets sent to clients.",
    messages_dropped: "Messages dropped by a bound (slow consumer, queue full, expiry).",
    deliveries_dropped_mailbox_full: "Copies dropped because another shard's mailbox was over its bound (also in messages_dropped).",
    replica_subscriptions: "Subscriptions in a shard's replica of the table (gauge; equal on every shard once replication settles).",
    changes_beyond_window: "Replicated changes that arrived more than runtime.max_pending_changes ahead of a missing one (kept).",
    publishes_held_for_order: "PUBLISH packets held until subscription changes another shard had already stamped reached this shard's replica (and, with runtime.subscribe_order = \"received\", until every other shard had handled what it had received before them: retained ones, any while a removal stamped before them is in flight, and any while the shard keeps runtime.subscribe_order_keep_bytes of messages routed at once).",
    copies_owed_for_order: "Copies sent to a subscription applied after a message was routed, because its SUBSCRIBE may have reached the broker before that PUBLISH (runtime.subscribe_order = \"received\").",
    input_fences_expired: "PUBLISH turns whose input fence passed after waiting 250 ms instead of for the drains it asked other shards for (runtime.subscribe_order = \"received\"; a shard starved of CPU or whose reads never come short).",
    publishes_not_authorized: "PUBLISH packets refused as not authorized (client writes to $SYS included).",
    deliveries_not_authorized: "Copies not delivered because the rules in force no longer let their subscriber read the topic (a partly readable subscription, a reloaded ACL, a shared-subscription member the ACL denies).",
    subscriptions_revoked: "Subscriptions removed because a backend, asked again after a reload, no longer lets their client read them.",
    wills_not_authorized: "Wills not authorized (ACL, authorization hook, $SYS): CONNECTs refused for their will, and wills dropped when they fired under rules that refuse them.",
    bytes_received: "Bytes received from clients.",
    bytes_sent: "Bytes sent to clients.",
    subscriptions: "Subscriptions held (gauge).",
    retained_messages: "Retained messages held (gauge, kept by the retained owner).",
    retained_bytes: "Payload bytes of the retained messages held (gauge, kept by the retained owner).",
    partial_frame_closed: "Connections closed because their partial packet did not fit in limits.max_partial_frame_bytes.",
    publishers_throttled: "Times a connection's reading was paused for going over limits.max_publish_rate or limits.max_publish_bytes_rate.",
    refused_overload: "Connections refused at accept in overload mode (overload.memory_high_bytes).",
    delayed_pending: "Delayed messages ($delayed/) waiting to be published (gauge).",
    delayed_published: "Delayed messages published when their delay ran out.",
    delayed_refused: "Delayed PUBLISH packets refused for delayed.max_messages.",
}

impl ShardCounters {
    /// Adds `n` to a counter of this shard's own block.
    pub fn add(counter: &AtomicU64, n: u64) {
        // Single writer per block: a relaxed load+store is enough and avoids a locked RMW.
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Subtracts `n` from a gauge of this shard's own block.
    pub fn sub(counter: &AtomicU64, n: u64) {
        counter.store(
            counter.load(Ordering::Relaxed).saturating_sub(n),
            Ordering::Relaxed,
        );
    }

    /// Sets a gauge of this shard's own block.
    pub fn set(counter: &AtomicU64, value: u64) {
        counter.store(value, Ordering::Relaxed);
    }
}

/// One shard's counters and labelled figures, on cache lines of their own.
#[derive(Debug, Default)]
struct ShardBlock {
    counters: ShardCounters,
    detail: ShardDetail,
}

/// Every shard's counter block; cloned into each shard, which writes only its own.
#[derive(Debug, Clone)]
pub struct Metrics {
    shards: Arc<[CachePadded<ShardBlock>]>,
}

impl Metrics {
    /// Counter blocks for `shards` shards.
    pub fn new(shards: usize) -> Self {
        Self {
            shards: (0..shards.max(1))
                .map(|_| CachePadded::new(ShardBlock::default()))
                .collect(),
        }
    }

    /// The number of shard blocks.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The block shard `index` writes.
    pub fn shard(&self, index: usize) -> &ShardCounters {
        &self.shards[index].counters
    }

    /// Both blocks of shard `index` (one lookup for a writer that touches both).
    #[inline]
    pub fn block(&self, index: usize) -> (&ShardCounters, &ShardDetail) {
        let block = &self.shards[index];
        (&block.counters, &block.detail)
    }

    /// The labelled figures shard `index` writes.
    pub fn detail(&self, index: usize) -> &ShardDetail {
        &self.shards[index].detail
    }

    /// The sum over all shards.
    pub fn snapshot(&self) -> Snapshot {
        let mut total = Snapshot::default();
        for block in self.shards.iter() {
            total.add(&block.counters);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_sums_every_shard() {
        let m = Metrics::new(3);
        ShardCounters::add(&m.shard(0).messages_received, 2);
        ShardCounters::add(&m.shard(2).messages_received, 5);
        ShardCounters::set(&m.shard(1).clients_connected, 7);
        let s = m.snapshot();
        assert_eq!(s.messages_received, 7);
        assert_eq!(s.clients_connected, 7);
        assert_eq!(s.bytes_sent, 0);
    }

    #[test]
    fn counters_written_from_their_own_threads_add_up() {
        let m = Metrics::new(2);
        std::thread::scope(|scope| {
            for shard in 0..2 {
                let m = &m;
                scope.spawn(move || {
                    for _ in 0..10_000 {
                        ShardCounters::add(&m.shard(shard).messages_sent, 1);
                    }
                });
            }
        });
        assert_eq!(m.snapshot().messages_sent, 20_000);
    }
}
