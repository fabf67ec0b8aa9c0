//! Keeping one publisher's order while a session moves between shards (MQTT 5.0 4.6.0-6).
//!
//! When a session moves from shard A to shard B, every shard X routes copies for it to A until X
//! applies the `Change::Owner` that names B, and to B after. A forwards what reaches it. Without
//! care a copy X sent straight to B could overtake an older one still being forwarded by A.
//!
//! So each shard X, right after applying the change, sends A a fence behind everything it already
//! routed there; A forwards its backlog, then the fence, to B. B holds the copies that came
//! straight from X until X's fence arrives, then delivers them in arrival order. Once A has passed
//! on the fences of every shard nothing more can reach it for the session, and it forgets its
//! forwarding entry.
//!
//! B hands the session on only once every fence is in. Before that, copies forwarded by A may
//! still be on their way to B, and a session that left with B's held (newer) copies would get
//! them ahead of those older ones. The request waits in the [`Holding`]; the old connection is
//! closed at once. Every shard that receives a session announces and fences it this way, also
//! one that only passes it on to a newer connection, so moves happen one at a time.

use super::durability::Durability;
use super::mobility::{Holding, Mobility};
use super::parts::{Delivery, Figures};
use std::collections::VecDeque;

use ring_runtime::ShardId;
use router::SubscriberId;

use super::timer_book::{TimerBook, TimerPurpose};
use super::{BrokerShard, Ctx};
use crate::message::{Recipient, ShardMsg, TakeoverRequest};

impl BrokerShard {
    /// A fence arrived: on the old shard pass it on behind the forwarded copies; on the new
    /// shard release what its origin sent straight here.
    pub(super) fn fence_arrived(
        &mut self,
        ctx: &mut Ctx,
        subscriber: SubscriberId,
        origin: ShardId,
        forwarded: bool,
    ) {
        if forwarded {
            self.release_held(ctx, subscriber, origin);
            return;
        }
        let Some(moved) = self.delivery.mobility.moved.get_mut(&subscriber) else {
            // The session ended here instead of moving: nothing is held anywhere for it.
            return;
        };
        let to = moved.to;
        moved.fences_left = moved.fences_left.saturating_sub(1);
        if moved.fences_left == 0 {
            self.delivery.mobility.moved.remove(&subscriber);
        }
        self.delivery
            .flush_routes(ctx, &mut self.durable, &self.figures, self.id);
        let fence = ShardMsg::Fence {
            subscriber,
            origin,
            forwarded: true,
        };
        self.figures.post(ctx, to, fence);
    }

    /// The fences of a session's move did not all arrive in time: deliver what is held, in
    /// arrival order, and let a deferred takeover go ahead.
    pub(super) fn fences_overdue(&mut self, ctx: &mut Ctx, subscriber: SubscriberId) {
        let Some(holding) = self.delivery.mobility.holding.remove(&subscriber) else {
            return;
        };
        tracing::warn!(
            missing = holding.waiting.len(),
            "fences overdue for a moving session: releasing its held copies"
        );
        for (_, recipient) in holding.held {
            self.deliver(ctx, recipient);
        }
        if let Some((request, _)) = holding.deferred {
            self.hand_over(ctx, request);
        }
    }

    fn release_held(&mut self, ctx: &mut Ctx, subscriber: SubscriberId, origin: ShardId) {
        let Some(holding) = self.delivery.mobility.holding.get_mut(&subscriber) else {
            return;
        };
        holding.waiting.retain(|shard| *shard != origin);
        let mut release = Vec::new();
        let mut kept = VecDeque::with_capacity(holding.held.len());
        for (from, recipient) in holding.held.drain(..) {
            if from == origin {
                release.push(recipient);
            } else {
                kept.push_back((from, recipient));
            }
        }
        holding.held = kept;
        let deferred = if holding.waiting.is_empty() {
            self.delivery
                .mobility
                .holding
                .remove(&subscriber)
                .and_then(|h| h.deferred)
        } else {
            None
        };
        for recipient in release {
            self.deliver(ctx, recipient);
        }
        if let Some((request, timer)) = deferred {
            self.timers.disarm(ctx, Some(timer));
            self.hand_over(ctx, request);
        }
    }

    /// Delivers a copy that came from `origin` (`forwarded`: through the session's old shard),
    /// unless it must wait for `origin`'s fence. Held copies are bounded by the session queue's
    /// bound; beyond it the oldest is dropped and counted.
    pub(super) fn deliver_from(
        &mut self,
        ctx: &mut Ctx,
        origin: ShardId,
        forwarded: bool,
        recipient: Recipient,
    ) {
        let bound = self.shared.config.queues.max_queued_messages as usize;
        if !forwarded
            && let Some(holding) = self
                .delivery
                .mobility
                .holding
                .get_mut(&recipient.subscriber)
            && holding.waiting.contains(&origin)
        {
            holding.held.push_back((origin, recipient));
            if holding.held.len() > bound {
                holding.held.pop_front();
                self.figures
                    .count_dropped(crate::metrics::DropReason::QueueFull, 1);
            }
            return;
        }
        self.deliver(ctx, recipient);
    }
}

impl Mobility {
    /// A session just arrived here from another shard: hold direct copies until every shard
    /// has fenced.
    pub(super) fn hold_until_fenced(&mut self, ctx: &Ctx, subscriber: SubscriberId) {
        let waiting = (0..ctx.shard_count())
            .map(|i| ShardId::new(i as u16))
            .collect();
        let holding = Holding {
            waiting,
            held: VecDeque::new(),
            deferred: None,
        };
        self.holding.insert(subscriber, holding);
    }

    /// Keeps a takeover of `subscriber`'s session until its fences are in (or overdue); gives
    /// the request back when nothing is held for the session.
    pub(super) fn defer_until_fenced(
        &mut self,
        timers: &mut TimerBook,
        ctx: &mut Ctx,
        subscriber: SubscriberId,
        request: TakeoverRequest,
    ) -> Result<(), TakeoverRequest> {
        if !self.holding.contains_key(&subscriber) {
            return Err(request);
        }
        let at = ctx.now() + self.fence_wait;
        let timer = timers.arm(ctx, at, TimerPurpose::FencesOverdue(subscriber));
        let Some(holding) = self.holding.get_mut(&subscriber) else {
            return Err(request);
        };
        // Each claim is superseded once (the directory swaps claims under its entry lock), and
        // a session with a deferred request cannot come back here meanwhile.
        debug_assert!(
            holding.deferred.is_none(),
            "one deferred takeover per holding"
        );
        if let Some((older, timer)) = holding.deferred.replace((request, timer)) {
            tracing::error!(
                client = older.client_id.as_str(),
                "takeover request superseded"
            );
            timers.disarm(ctx, Some(timer));
        }
        Ok(())
    }
}

impl Delivery {
    /// Sends the fences due, behind every copy already routed this turn.
    pub(super) fn send_fences(
        &mut self,
        ctx: &mut Ctx,
        durable: &mut Durability,
        figures: &Figures,
        origin: ShardId,
    ) {
        if self.mobility.fences_due.is_empty() {
            return;
        }
        self.flush_routes(ctx, durable, figures, origin);
        for (previous, subscriber) in std::mem::take(&mut self.mobility.fences_due) {
            let fence = ShardMsg::Fence {
                subscriber,
                origin,
                forwarded: false,
            };
            figures.post(ctx, previous, fence);
        }
    }
}
