//! Replicated state: subscription, ownership and retained changes are stamped by the shared
//! sequencer, sent to every shard (this one included), and applied by each in the same order.
//! Stamping and sending is [`Figures::broadcast`] (posting counts what a mailbox drops);
//! putting in order and applying is [`Replication`]'s.

use std::sync::atomic::Ordering;

use ring_runtime::ShardId;
use router::{ChangeSeq, Received, Sequenced, SubscriptionChange};
use tracing::warn;

use super::Ctx;
use super::mobility::Mobility;
use super::order_kept::NewSubscription;
use super::parts::{Figures, Replication};
use super::replica::Applied;
use crate::message::{Change, ChangeSource, SentChange, ShardMsg};
use crate::metrics::ShardCounters;
use crate::shared_parts::{ChangeOrder, Links, StampedChange};

impl Figures {
    /// Stamps `change` in `order` and sends it to every shard; returns its place in the order.
    /// Nothing else is stamped by this shard until every copy is posted, so a gap in the order
    /// is only ever a change in flight.
    pub(super) fn broadcast(
        &self,
        ctx: &mut Ctx,
        order: &ChangeOrder,
        change: Change,
    ) -> ChangeSeq {
        let seq = order.stamp(match &change {
            Change::Subscription(SubscriptionChange::Subscribe { .. }) => StampedChange::Subscribe,
            Change::Subscription(SubscriptionChange::Unsubscribe { .. }) => {
                StampedChange::Unsubscribe
            }
            _ => StampedChange::Other,
        });
        let shards = ctx.shard_count();
        let source = ChangeSource {
            shard: ctx.shard_id(),
            input: ctx.input_stamp(),
        };
        let change = SentChange { change, source };
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
}

/// What applying a change does to the rest of the shard: sessions it moves are fenced
/// (`mobility`), its subscription counts are reported to the cluster `links` (shard 0 only)
/// and counted.
pub(super) struct ApplyEffects<'a> {
    pub(super) mobility: &'a mut Mobility,
    pub(super) figures: &'a Figures,
    pub(super) links: &'a Links,
    pub(super) shard: ShardId,
}

impl Replication {
    /// A change arrived: put it in order and apply every change whose turn it is. A change is
    /// never refused (a gap would stop every later one); one that arrives further ahead than
    /// `runtime.max_pending_changes` is counted and reported on a log scale.
    pub(super) fn receive_change(
        &mut self,
        change: Sequenced<SentChange>,
        mut effects: ApplyEffects<'_>,
    ) {
        let seq = change.seq.0;
        if self.replica.changes.receive(change) == Received::BeyondWindow {
            let counters = effects.figures.counters();
            ShardCounters::add(&counters.changes_beyond_window, 1);
            let count = counters.changes_beyond_window.load(Ordering::Relaxed);
            if count.is_power_of_two() {
                let waiting_for = self.replica.changes.next_expected().0;
                warn!(
                    seq,
                    waiting_for,
                    count,
                    "replicated change far ahead of a missing one (kept): runtime.max_pending_changes exceeded"
                );
            }
        }
        while let Some(ready) = self.replica.changes.pop_ready() {
            self.apply(ready, &mut effects);
        }
    }

    /// Applies one change to the replica, then does what it asks of the rest of the shard.
    /// A new subscription first takes the copies it owes kept messages it may precede
    /// (`order_kept.rs`), routed after this batch of mailbox messages.
    fn apply(&mut self, sent: Sequenced<SentChange>, effects: &mut ApplyEffects<'_>) {
        let Sequenced { seq, change: sent } = sent;
        let filter = effects
            .links
            .reports_interest(effects.shard)
            .then(|| interest_filter(&sent.change))
            .flatten();
        if let Change::Subscription(subscribe) = &sent.change {
            self.take_owed_copies(subscribe, (seq, sent.source), effects.links);
        }
        let effect = self.replica.apply(sent.change);
        match effect {
            Applied::Subscription { owner, delta } => {
                if let Some(filter) = filter {
                    effects.links.report_interest(&filter, delta);
                }
                if let Some(owner) = owner.filter(|owner| *owner != effects.shard) {
                    self.gate.to_nudge.insert(owner);
                }
                let held = self.replica.subscription_count() as u64;
                ShardCounters::set(&effects.figures.counters().replica_subscriptions, held);
            }
            Applied::Moved { subscriber, from } => effects.mobility.fence_later(from, subscriber),
            Applied::Other => {}
        }
    }

    /// What a subscription change about to be applied owes the kept messages
    /// (`order_kept.rs`): set aside in `rematched` for the shard to route. A shared group owes
    /// nothing for a topic whose groups the cluster serves (NATS chose their member).
    fn take_owed_copies(
        &mut self,
        change: &SubscriptionChange,
        stamped: (ChangeSeq, ChangeSource),
        links: &Links,
    ) {
        if self.kept.is_empty() {
            return;
        }
        let SubscriptionChange::Subscribe {
            subscriber,
            filter,
            options,
            id,
        } = change
        else {
            return;
        };
        let new = NewSubscription {
            subscriber: *subscriber,
            filter,
            options: *options,
            id: *id,
        };
        let groups_here = |topic: &router::TopicName| !links.shares_served_by_cluster(topic);
        let table = &mut self.replica.table;
        let owed = self.kept.owed_to(&new, stamped, table, groups_here);
        self.rematched.extend(owed);
    }

    /// Wakes the shards whose sessions subscribed in the changes just applied: their
    /// acknowledgements wait for every shard (see `gate.rs`).
    pub(super) fn nudge_acknowledging_shards(&mut self, ctx: &mut Ctx, figures: &Figures) {
        for shard in self.gate.to_nudge.drain() {
            figures.post(ctx, shard, ShardMsg::Applied);
        }
    }

    /// Tells the other shards (through `order`) how far shard `shard` has applied.
    pub(super) fn publish_applied_watermark(&self, order: &ChangeOrder, shard: ShardId) {
        let applied = self.replica.changes.next_expected().0;
        order.applied[shard.index()].store(applied, Ordering::Release);
    }
}

/// How far every shard has applied the change `order`.
pub(super) fn applied_everywhere(order: &ChangeOrder) -> ChangeSeq {
    let least = order
        .applied
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .min();
    ChangeSeq(least.unwrap_or(0))
}

/// The filter text of a subscription change (whose effect shard 0 reports to the cluster
/// link); `None` for other changes.
fn interest_filter(change: &Change) -> Option<String> {
    match change {
        Change::Subscription(
            SubscriptionChange::Subscribe { filter, .. }
            | SubscriptionChange::Unsubscribe { filter, .. },
        ) => Some(filter.as_str().to_owned()),
        _ => None,
    }
}
