//! The bounds on what send queues hold: `queues.outbound_bytes` for each connection and
//! `queues.max_total_outbound_bytes` over every connection of the broker.
//!
//! Each shard knows its own send queues' total exactly (`ShardCtx::shard_queued_bytes`) and
//! publishes it at the end of each turn and whenever it moved by [`PUBLISH_STEP`] since it was
//! last published, reading the other shards' totals at the same moment ([`ShardView`]): the
//! broker-wide check costs no atomic operation per copy, and the total passes the budget by at
//! most a step per other shard (plus each connection's allowance). A frame shared by several
//! connections (a large PUBLISH encoded once) counts once for each: the budget bounds what the
//! queues would hold if nothing were shared.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

/// Over the broker-wide budget, what a connection may still hold: one write's worth. A
/// consumer that keeps up drains this much every turn and goes on receiving; one that does not
/// read stops taking copies.
pub const OVER_BUDGET_ALLOWANCE: u64 = 64 * 1024;

/// A shard publishes its send queues' total when it moved by this much since it last did.
pub const PUBLISH_STEP: u64 = 256 * 1024;

/// The send queues' bounds, and what each shard's queues held when it last published.
pub struct OutboundBudget {
    per_connection: u64,
    total: u64,
    shards: Box<[CachePadded<AtomicU64>]>,
}

impl OutboundBudget {
    /// Bounds for `shards` shards: `per_connection` bytes each, `total` over all of them.
    pub fn new(per_connection: u64, total: u64, shards: usize) -> Self {
        Self {
            per_connection,
            total,
            shards: (0..shards.max(1))
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }

    /// Records that shard `shard`'s send queues hold `queued` bytes, and returns what the
    /// others held at their last turn's end.
    pub fn publish(&self, shard: usize, queued: u64) -> u64 {
        let mut others = 0u64;
        for (index, slot) in self.shards.iter().enumerate() {
            if index == shard {
                // Stored only when it changed: an idle shard writes nothing others read.
                if slot.load(Ordering::Relaxed) != queued {
                    slot.store(queued, Ordering::Relaxed);
                }
            } else {
                others = others.saturating_add(slot.load(Ordering::Relaxed));
            }
        }
        others
    }

    /// Bytes in every shard's send queues as last published.
    pub fn used(&self) -> u64 {
        self.shards
            .iter()
            .map(|slot| slot.load(Ordering::Relaxed))
            .fold(0, u64::saturating_add)
    }

    /// The broker-wide budget (`queues.max_total_outbound_bytes`).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether a connection whose send queue holds `conn_queued` bytes takes another frame,
    /// while its shard's queues hold `shard_queued` and the other shards' held `others`. An
    /// empty queue always takes one (a message larger than a bound still goes out, alone);
    /// otherwise the queue must be within its own bound and, over the broker-wide budget,
    /// within [`OVER_BUDGET_ALLOWANCE`].
    pub fn admits(&self, conn_queued: u64, shard_queued: u64, others: u64) -> bool {
        if conn_queued == 0 {
            return true;
        }
        if conn_queued > self.per_connection {
            return false;
        }
        conn_queued <= OVER_BUDGET_ALLOWANCE || shard_queued.saturating_add(others) <= self.total
    }
}

/// One shard's view of the broker-wide total: what it last published of its own, and what the
/// other shards held at that moment.
#[derive(Debug, Default)]
pub struct ShardView {
    shard: usize,
    published: u64,
    others: u64,
}

impl ShardView {
    /// The view of shard `shard`, nothing published yet.
    pub fn new(shard: usize) -> Self {
        Self {
            shard,
            ..Self::default()
        }
    }

    /// Publishes `shard_queued` (the shard's send queues' total now) and reads the others.
    pub fn publish(&mut self, budget: &OutboundBudget, shard_queued: u64) {
        self.others = budget.publish(self.shard, shard_queued);
        self.published = shard_queued;
    }

    /// [`OutboundBudget::admits`] with this shard's view, published anew first when the
    /// shard's total moved by [`PUBLISH_STEP`].
    pub fn admits(&mut self, budget: &OutboundBudget, conn_queued: u64, shard_queued: u64) -> bool {
        if shard_queued.abs_diff(self.published) >= PUBLISH_STEP {
            self.publish(budget, shard_queued);
        }
        budget.admits(conn_queued, shard_queued, self.others)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn each_connection_is_held_to_its_bound() {
        let budget = OutboundBudget::new(4 * MIB, 1024 * MIB, 2);
        assert!(budget.admits(4 * MIB, 4 * MIB, 0));
        assert!(!budget.admits(4 * MIB + 1, 4 * MIB + 1, 0));
    }

    #[test]
    fn an_empty_queue_always_takes_one_frame() {
        let budget = OutboundBudget::new(4 * MIB, 8 * MIB, 2);
        assert!(budget.admits(0, 100 * MIB, 100 * MIB));
    }

    #[test]
    fn over_the_budget_only_queues_within_the_allowance_grow() {
        let budget = OutboundBudget::new(4 * MIB, 8 * MIB, 2);
        assert!(budget.admits(MIB, 5 * MIB, 3 * MIB), "at the budget");
        assert!(!budget.admits(MIB, 5 * MIB, 3 * MIB + 1), "over it");
        assert!(budget.admits(OVER_BUDGET_ALLOWANCE, 5 * MIB, 3 * MIB + 1));
    }

    #[test]
    fn a_shard_reads_what_the_others_published() {
        let budget = OutboundBudget::new(4 * MIB, 8 * MIB, 3);
        assert_eq!(budget.publish(0, 5), 0);
        assert_eq!(budget.publish(1, 7), 5);
        assert_eq!(budget.publish(2, 1), 12);
        assert_eq!(budget.publish(0, 0), 8);
        assert_eq!(budget.used(), 8);
    }

    #[test]
    fn a_shard_that_queues_a_step_sees_what_the_others_queued_since() {
        let budget = OutboundBudget::new(4 * MIB, 8 * MIB, 2);
        let mut first = ShardView::new(0);
        let mut second = ShardView::new(1);
        first.publish(&budget, 0);
        second.publish(&budget, 8 * MIB);
        assert!(first.admits(&budget, MIB, PUBLISH_STEP - 1), "not yet seen");
        assert!(!first.admits(&budget, MIB, PUBLISH_STEP), "seen at a step");
    }
}
