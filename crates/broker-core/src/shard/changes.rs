//! Replicated state: subscription, ownership and retained changes are stamped by the shared
//! sequencer, sent to every shard (this one included), and applied by each in the same order.

use std::sync::atomic::Ordering;

use ring_runtime::ShardId;
use router::{ChangeSeq, Received, Sequenced};
use tracing::warn;

use super::replica::Applied;
use super::{BrokerShard, Ctx};
use crate::message::{Change, ShardMsg};
use crate::metrics::ShardCounters;

impl BrokerShard {
    /// Stamps `change` and sends it to every shard; returns its place in the order. Nothing else
    /// is stamped by this shard until every copy is posted, so a gap in the order is only ever a
    /// change in flight.
    pub(super) fn broadcast(&mut self, ctx: &mut Ctx, change: Change) -> ChangeSeq {
        let seq = self.shared.order.sequencer.next();
        let shards = ctx.shard_count();
        for index in 0..shards {
            let change = change.clone();
            self.post(
                ctx,
                ShardId::new(index as u16),
                ShardMsg::Change(Sequenced { seq, change }),
            );
        }
        seq
    }

    /// A change arrived: put it in order and apply every change whose turn it is. A change is
    /// never refused (a gap would stop every later one); one that arrives further ahead than
    /// `runtime.max_pending_changes` is counted and reported on a log scale.
    pub(super) fn receive_change(&mut self, change: Sequenced<Change>) {
        let seq = change.seq.0;
        if self.replication.replica.changes.receive(change) == Received::BeyondWindow {
            let counters = self.figures.counters();
            ShardCounters::add(&counters.changes_beyond_window, 1);
            let count = counters.changes_beyond_window.load(Ordering::Relaxed);
            if count.is_power_of_two() {
                let waiting_for = self.replication.replica.changes.next_expected().0;
                warn!(
                    seq,
                    waiting_for,
                    count,
                    "replicated change far ahead of a missing one (kept): runtime.max_pending_changes exceeded"
                );
            }
        }
        while let Some(ready) = self.replication.replica.changes.pop_ready() {
            self.apply(ready);
        }
    }

    /// Applies one change to the replica, then does what it asks of the rest of the shard.
    fn apply(&mut self, change: Sequenced<Change>) {
        let filter = self.cluster_filter(&change.change);
        let effect = self.replication.replica.apply(change.change);
        match effect {
            Applied::Subscription { owner, delta } => {
                if let Some(filter) = filter {
                    self.shared.links.report_interest(&filter, delta);
                }
                if let Some(owner) = owner.filter(|owner| *owner != self.id) {
                    self.replication.gate.to_nudge.insert(owner);
                }
                let held = self.replication.replica.subscription_count() as u64;
                ShardCounters::set(&self.figures.counters().replica_subscriptions, held);
            }
            Applied::Moved { subscriber, from } => {
                self.delivery.mobility.fence_later(from, subscriber)
            }
            Applied::Other => {}
        }
    }

    /// Wakes the shards whose sessions subscribed in the changes just applied: their acknowledgements
    /// wait for every shard (see `gate.rs`).
    pub(super) fn nudge_acknowledging_shards(&mut self, ctx: &mut Ctx) {
        let shards: Vec<ShardId> = self.replication.gate.to_nudge.drain().collect();
        for shard in shards {
            self.post(ctx, shard, ShardMsg::Applied);
        }
    }

    /// How far every shard has applied the change order.
    pub(super) fn applied_everywhere(&self) -> ChangeSeq {
        let least = self
            .shared
            .order
            .applied
            .iter()
            .map(|a| a.load(Ordering::Relaxed))
            .min();
        ChangeSeq(least.unwrap_or(0))
    }

    /// Tells the other shards how far this one has applied.
    pub(super) fn publish_applied_watermark(&mut self) {
        let applied = self.replication.replica.changes.next_expected().0;
        self.shared.order.applied[self.id.index()].store(applied, Ordering::Release);
    }
}
