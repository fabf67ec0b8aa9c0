//! Subscription order across connections: a SUBSCRIBE (or UNSUBSCRIBE) that any shard handled
//! before this shard handles a PUBLISH takes effect for that PUBLISH, as on a broker with one
//! thread. Each shard matches against its own replica of the subscription table, which learns
//! another shard's change only when it arrives through the mailbox; without a wait, a PUBLISH
//! sent right after another client's SUBSCRIBE could be matched before the change arrived.
//!
//! So a PUBLISH first reads the order's subscription horizon ([`ChangeOrder::subscription_horizon`]:
//! every subscription change stamped so far lies below it). When this shard's replica has
//! applied that far, which is the rule whenever subscriptions are not changing, the PUBLISH is
//! handled at once: one atomic load and a comparison. Otherwise it is set aside with its
//! connection parked (what the client sends behind it waits in the carry, so its packets keep
//! their order) and handled as soon as the changes have arrived and been applied
//! ([`BrokerShard::release_ordered_publishes`], after each batch of mailbox messages): a change
//! is in flight only until its shard's turn ends, so the wait is brief.
//!
//! A SUBSCRIBE whose bytes another shard has not read yet when the PUBLISH is handled (both
//! packets in the kernel, that shard not yet woken or still busy with an earlier turn) has no
//! stamp yet. With `runtime.subscribe_order = "received"` the runtime's input fences cover it
//! ([`ring_runtime::ShardCtx::input_fence`]): the PUBLISH is routed at once and its messages
//! kept until every other shard has handled what it had received when the PUBLISH's turn began
//! and the changes stamped by then are applied here; a subscription applied meanwhile that may
//! precede them gets its copies then (`order_kept.rs`). Where a copy could not be taken back
//! (a removal in flight) or could be doubled (a retained PUBLISH), or the book is full, the
//! PUBLISH waits for its fence instead, its connection parked, and only then reads the horizon.
//! With `"handled"` the fence passes at once and such a SUBSCRIBE may miss the PUBLISH.
//!
use codec::Publish;
use ring_runtime::{ConnId, InputFence};
use router::ChangeSeq;

use super::order_kept::RoutedAgainst;
use super::order_waits::HeldPublish;
use super::{BrokerShard, Ctx, Fault};
use crate::message::BareCopy;
use crate::metrics::ShardCounters;

impl BrokerShard {
    /// A client's PUBLISH: handled now if every other shard has handled what it had received
    /// before it and this shard's replica holds every subscription change stamped so far,
    /// else set aside (its connection parked) until both hold.
    pub(super) fn publish_in_order(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        publish: Publish,
    ) -> Result<(), Fault> {
        let (fence, horizon) = match self.replication.order_waits.covering(conn) {
            Some(horizon) => (InputFence::PASSED, Some(horizon)),
            None => {
                let fence = ctx.input_fence();
                let passed = ctx.input_fence_passed(fence);
                (
                    fence,
                    passed.then(|| self.shared.order.subscription_horizon()),
                )
            }
        };
        let applied = self.replication.replica.changes.next_expected();
        if horizon.is_some_and(|horizon| applied >= horizon) {
            return self.handle_publish(ctx, conn, publish);
        }
        if let Some(against) = self.routable_now(ctx, fence, horizon, &publish) {
            self.replication.kept.record(against);
            let handled = self.handle_publish(ctx, conn, publish);
            self.replication.kept.stop_recording();
            return handled;
        }
        ShardCounters::add(&self.figures.counters().publishes_held_for_order, 1);
        // What the client sends meanwhile waits in the runtime, then in the kernel (TCP pushes
        // back), so the carry holds only bytes that arrived with this PUBLISH: its fence and
        // horizon cover them all when it is released. The hold is brief (a turn of another
        // shard): the socket's receive stays armed unless data comes meanwhile.
        ctx.hold_reading(conn);
        ctx.insist_on_input_fence(fence);
        let held = HeldPublish {
            conn,
            fence,
            horizon,
            publish,
        };
        self.replication.order_waits.hold(held);
        if let Some(connection) = self.conns.get_mut(&conn) {
            connection.park();
        }
        Ok(())
    }

    /// With `"received"`, whether a PUBLISH whose fence or horizon has not passed yet may be
    /// routed now and its messages kept (`order_kept.rs`), and what they are kept with: not
    /// while a removal stamped before it has not reached this replica (a copy sent cannot be
    /// taken back), not a retained one (its copy through a subscription that precedes it
    /// could double the copy that subscription's retained delivery sends), nor one beyond the
    /// book's bound.
    fn routable_now(
        &self,
        ctx: &Ctx,
        fence: InputFence,
        horizon: Option<ChangeSeq>,
        publish: &Publish,
    ) -> Option<RoutedAgainst> {
        let kept = &self.replication.kept;
        let applied = self.replication.replica.changes.next_expected();
        if !self.shared.config.runtime.strict_subscribe_order
            || publish.retain
            || !kept.has_room()
            || applied < self.shared.order.removal_horizon()
        {
            return None;
        }
        let marks = match ctx.input_fence_passed(fence) {
            true => None,
            false => Some(ctx.input_fence_marks(fence)?),
        };
        let horizon = horizon.unwrap_or_else(|| self.shared.order.subscription_horizon());
        Some(RoutedAgainst {
            fence,
            marks,
            horizon,
        })
    }

    /// Sends the copies that subscriptions applied in this mailbox batch owe kept messages
    /// (`order_kept.rs`), and lets go of the kept messages nothing can precede any more.
    pub(super) fn settle_kept_publishes(&mut self, ctx: &mut Ctx) {
        for owed in std::mem::take(&mut self.replication.rematched) {
            let copy = BareCopy::new(owed.qos, owed.retain, owed.id.as_slice(), owed.shared);
            let owner = self.replication.replica.owner(owed.subscriber);
            ShardCounters::add(&self.figures.counters().copies_owed_for_order, 1);
            self.send_copy(ctx, (owner, owed.subscriber), &owed.message, copy);
        }
        if self.replication.kept.is_empty() {
            return;
        }
        let applied = self.replication.replica.changes.next_expected();
        let order = &self.shared.order;
        self.replication.kept.retire(
            applied,
            |fence| ctx.input_fence_passed(fence),
            || order.subscription_horizon(),
        );
    }

    /// Handles the publishes set aside whose fences have passed and whose subscription changes
    /// have now been applied here, then lets their connections read on (after each batch of
    /// mailbox messages, and when fences pass).
    pub(super) fn release_ordered_publishes(&mut self, ctx: &mut Ctx) {
        if self.replication.order_waits.is_empty() {
            return;
        }
        let applied = self.replication.replica.changes.next_expected();
        let order = &self.shared.order;
        let ready = self.replication.order_waits.take_ready(
            applied,
            |fence| ctx.input_fence_passed(fence),
            || order.subscription_horizon(),
        );
        for (held, horizon) in ready {
            let conn = held.conn;
            if let Err(fault) = self.handle_publish(ctx, conn, held.publish) {
                self.wire().fail(ctx, conn, fault);
                continue;
            }
            // The packets that arrived behind it are handled under the same horizon (they
            // came before it was handled), not held again for changes stamped since.
            self.replication.order_waits.cover(conn, horizon);
            self.unpark_if_free(ctx, conn);
            self.replication.order_waits.uncover();
            // Reading resumes unless the publish rate holds it (its timer resumes it then).
            if !self.door.throttle.is_throttled(conn) {
                ctx.resume_reading(conn);
            }
        }
    }
}
