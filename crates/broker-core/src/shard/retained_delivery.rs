//! Retained messages for a new subscription, sent as the connection drains: after its SUBACK
//! a subscription gets a [`RetainedCursor`] (`retained_cursor.rs`) that walks the replica's
//! retained index in topic order, one message at a time, and puts copies on the wire only
//! while the connection's send queue is under its bound and, for a QoS 1/2 copy, while its
//! inflight window has room with nothing queued ahead. Nothing is dropped for lack of room:
//! the cursor waits in the shard's backlog (send queue full, or its turn's share of
//! `retained.delivery_per_turn` spent) or for the acknowledgement that frees a window slot.
//!
//! What the cursor reaches is the index as it is then: a message cleared meanwhile is not
//! sent, one replaced goes with its current value unless it came in after the delivery
//! started (then the subscription already got it live), one expired is skipped. UNSUBSCRIBE
//! and the connection's end drop the cursor; a session taken over, on this shard or another,
//! gets no rest (the new connection subscribes again to get the retained messages).

use std::sync::Arc;

use codec::QoS;
use ring_runtime::ConnId;
use router::{RetainedStep, SubscriberId, SubscriptionFilter};

use super::ack_gate::RetainedDue;
use super::retained_cursor::RetainedCursor;
use super::{BrokerShard, Ctx};
use crate::message::{Expiry, Outgoing, Recipient};
use crate::session::SessionAt;

/// Topics one step of a cursor looks at before it yields (a filter such as `+/x` may pass many
/// that do not match); each step counts once against `retained.delivery_per_turn`.
const SCAN_PER_STEP: usize = 64;

/// Why a connection's retained delivery stopped for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pause {
    /// Its share of this turn is spent: again next turn.
    TurnSpent,
    /// Its send queue is at its bound: again once it drains.
    SendQueueFull,
    /// A QoS 1/2 copy waits for a window slot (or for copies queued ahead).
    WindowFull,
    /// The connection has no session here any more: the delivery ends.
    Gone,
}

/// The session a connection's retained copies go to.
#[derive(Debug, Clone, Copy)]
struct Target {
    at: SessionAt,
    subscriber: SubscriberId,
}

impl BrokerShard {
    /// A SUBACK went out: starts the retained delivery of each new subscription in `due`.
    pub(super) fn start_retained(&mut self, ctx: &mut Ctx, conn: ConnId, due: RetainedDue) {
        if due.is_empty() {
            return;
        }
        let started_ns = self.figures.turn_nanos(ctx);
        for owed in due {
            // Shared subscriptions get no retained messages (`wants_retained`).
            let SubscriptionFilter::Plain(filter) = owed.filter else {
                continue;
            };
            let cursor = RetainedCursor {
                key: owed.key,
                filter,
                granted: owed.granted,
                id: owed.id,
                after: None,
                started_ns,
            };
            self.delivery.retained.start(conn, cursor);
        }
        self.advance_retained(ctx, conn);
    }

    /// Sends what `conn`'s retained deliveries can send now, oldest subscription first, and
    /// arranges to be called again: from the backlog (next turn, or once the send queue
    /// drains) or from an acknowledgement.
    pub(super) fn advance_retained(&mut self, ctx: &mut Ctx, conn: ConnId) {
        if self.delivery.retained.is_empty() {
            return;
        }
        let Some(mut cursors) = self.delivery.retained.take(conn) else {
            return;
        };
        let mut budget = self.shared.config.retained.delivery_per_turn;
        let mut pause = None;
        while let Some(cursor) = cursors.front_mut() {
            match self.advance_cursor(ctx, conn, cursor, &mut budget) {
                Ok(()) => drop(cursors.pop_front()),
                Err(paused) => {
                    pause = Some(paused);
                    break;
                }
            }
        }
        match pause {
            None | Some(Pause::Gone) => return,
            Some(Pause::TurnSpent | Pause::SendQueueFull) => {
                self.delivery.routes.backlog.insert(conn);
                self.timers
                    .arm_backlog_retry(ctx, self.shared.config.queues.backlog_retry);
            }
            Some(Pause::WindowFull) => {}
        }
        if self.conns.get(&conn).is_some() {
            self.delivery.retained.put_back(conn, cursors);
        }
    }

    /// Sends `cursor`'s next copies while `budget` and the connection allow; `Ok` once it
    /// has reached its last topic (or its subscription is gone).
    fn advance_cursor(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        cursor: &mut RetainedCursor,
        budget: &mut u32,
    ) -> Result<(), Pause> {
        let target = self.retained_target(conn).ok_or(Pause::Gone)?;
        let subscribed = self
            .sessions
            .at(target.at)
            .is_some_and(|s| s.subscriptions.contains_key(&cursor.key));
        if !subscribed {
            return Ok(());
        }
        loop {
            if *budget == 0 {
                return Err(Pause::TurnSpent);
            }
            if !self
                .delivery
                .send_queue_admits(&self.shared.limits.outbound, ctx, conn)
            {
                return Err(Pause::SendQueueFull);
            }
            let retained = &self.replication.replica.retained;
            let step = retained.next_after(&cursor.filter, cursor.after.as_deref(), SCAN_PER_STEP);
            let (topic, message) = match step {
                RetainedStep::End => return Ok(()),
                RetainedStep::Scanned(topic) => {
                    cursor.after = Some(topic.to_bytes());
                    *budget -= 1;
                    continue;
                }
                RetainedStep::Found(topic, message) => (topic.to_bytes(), Arc::clone(message)),
            };
            let qos = message.qos.min(cursor.granted);
            if qos != QoS::AtMostOnce && !self.window_takes_one(target.at) {
                return Err(Pause::WindowFull);
            }
            cursor.after = Some(topic);
            *budget -= 1;
            if message.expiry(ctx.now()) == Expiry::Expired || cursor.is_newer(message.received_ns)
            {
                continue;
            }
            let outgoing = Outgoing::new(message, qos, true, cursor.id.as_slice(), None);
            let subscriber = target.subscriber;
            self.deliver(
                ctx,
                Recipient {
                    subscriber,
                    outgoing,
                },
            );
        }
    }

    /// The session `conn` is attached to here, while it is.
    fn retained_target(&self, conn: ConnId) -> Option<Target> {
        let subscriber = self.conns.get(&conn)?.session()?;
        let at = self.sessions.locate(subscriber)?;
        let session = self.sessions.at(at)?;
        (session.conn == Some(conn)).then_some(Target { at, subscriber })
    }

    /// Whether a QoS 1/2 copy for the session at `at` would go out at once: a window slot
    /// free and nothing queued, spilled or owed ahead of it (then it never enters the queue).
    fn window_takes_one(&self, at: SessionAt) -> bool {
        self.sessions.at(at).is_some_and(|session| {
            session.queue.is_empty()
                && session.spilled().is_none()
                && !session.inflight.owes_resends()
                && session.inflight.has_room()
        })
    }
}
