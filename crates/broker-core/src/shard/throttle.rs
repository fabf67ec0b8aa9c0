//! Per-connection publish rate limits (`limits.max_publish_rate`,
//! `limits.max_publish_bytes_rate`): two token buckets per connection, each holding one
//! second's worth. Every PUBLISH handled is charged (one message, its packet's bytes) and may
//! take a bucket into debt; a connection in debt is slowed, never dropped from: its packets
//! wait in its carry (it is parked, like behind a SUBSCRIBE, `gate.rs`) and the runtime stops
//! reading its socket (`ShardCtx::pause_reading`), so TCP flow control pushes back on the
//! client, until a timer finds the debt paid. Other connections are not affected.
//!
//! Buckets exist only for connections that published while a limit was set; with no limit a
//! PUBLISH costs two relaxed loads. The limits are read at every charge, so a reload applies
//! to later packets.

use std::time::Instant;

use ring_runtime::ConnId;
use tracing::debug;

use super::rate_buckets::{Buckets, Throttle};
use super::timer_book::{TimerBook, TimerPurpose};
use super::{BrokerShard, Ctx};
use crate::conn::Connections;
use crate::metrics::ShardCounters;
use crate::settings::PublishRates;
use crate::shared_parts::BrokerTime;

/// What charging a PUBLISH acts on: the buckets, the timer book (when a pause ends), the
/// connections (a paused one is parked) and the counters.
pub(super) struct Throttling<'a> {
    pub(super) throttle: &'a mut Throttle,
    pub(super) timers: &'a mut TimerBook,
    pub(super) conns: &'a mut Connections,
    pub(super) counters: &'a ShardCounters,
}

impl Throttling<'_> {
    /// A PUBLISH of `len` bytes (its whole packet) from `conn` was handled: charge it at
    /// `rates`, and pause the connection when that put it in debt.
    pub(super) fn charge_publish(
        &mut self,
        rates: PublishRates,
        ctx: &mut Ctx,
        conn: ConnId,
        len: usize,
    ) {
        if !rates.any() {
            return;
        }
        let now = ctx.now();
        let bucket = self
            .throttle
            .buckets
            .entry(conn)
            .or_insert_with(|| Buckets::full(rates, now));
        bucket.refill(rates, now);
        bucket.charge(len);
        if bucket.resume.is_some() {
            return;
        }
        if let Some(wait) = bucket.debt_wait(rates) {
            self.pause_publisher(ctx, conn, now + wait);
        }
    }

    /// Parks `conn` and stops reading its socket until `until`.
    fn pause_publisher(&mut self, ctx: &mut Ctx, conn: ConnId, until: Instant) {
        let Some(connection) = self.conns.get_mut(&conn) else {
            return;
        };
        if !connection.is_connected() {
            return;
        }
        connection.park();
        ctx.pause_reading(conn);
        ShardCounters::add(&self.counters.publishers_throttled, 1);
        debug!(
            pause_ms = until.saturating_duration_since(ctx.now()).as_millis(),
            "over the publish rate: reading paused"
        );
        self.throttle.arm_resume(self.timers, ctx, conn, until);
    }
}

impl Throttle {
    fn arm_resume(&mut self, timers: &mut TimerBook, ctx: &mut Ctx, conn: ConnId, until: Instant) {
        let timer = timers.arm(ctx, until, TimerPurpose::Throttle(conn));
        match self.buckets.get_mut(&conn) {
            Some(bucket) => bucket.resume = Some(timer),
            None => timers.disarm(ctx, Some(timer)),
        }
    }

    /// The pause of `conn` is due to end: whether it may be read again (false while it is
    /// still in debt at `rates`, the limit lowered meanwhile: the pause goes on).
    fn pause_over(
        &mut self,
        timers: &mut TimerBook,
        rates: PublishRates,
        ctx: &mut Ctx,
        conn: ConnId,
    ) -> bool {
        let now = ctx.now();
        let Some(bucket) = self.buckets.get_mut(&conn) else {
            return false;
        };
        bucket.resume = None;
        bucket.refill(rates, now);
        if let Some(wait) = bucket.debt_wait(rates) {
            self.arm_resume(timers, ctx, conn, now + wait);
            return false;
        }
        true
    }

    /// `conn`'s keep-alive deadline: a connection paused for its publish rate is not read, so
    /// its silence is ours and it counts as active now (on the broker's `time`).
    pub(super) fn keep_alive_while_throttled(
        &self,
        conns: &mut Connections,
        time: &BrokerTime,
        ctx: &Ctx,
        conn: ConnId,
        deadline: Instant,
    ) -> Instant {
        if ctx.now() < deadline || !self.is_throttled(conn) {
            return deadline;
        }
        let since_start = time.since_start(ctx.now());
        let Some(connection) = conns.get_mut(&conn) else {
            return deadline;
        };
        connection.touch(since_start);
        connection
            .keep_alive_deadline(time.started)
            .unwrap_or(deadline)
    }

    /// `conn` closed: forget its buckets.
    pub(super) fn throttle_closed(&mut self, timers: &mut TimerBook, ctx: &mut Ctx, conn: ConnId) {
        if let Some(bucket) = self.buckets.remove(&conn) {
            timers.disarm(ctx, bucket.resume);
        }
    }
}

impl BrokerShard {
    /// The pause of `conn` is due to end: read it again unless it is still in debt (the limit
    /// was lowered meanwhile), then handle what waited in its carry.
    pub(super) fn throttle_elapsed(&mut self, ctx: &mut Ctx, conn: ConnId) {
        let rates = self.shared.door.abuse.publish_rates();
        if self
            .door
            .throttle
            .pause_over(&mut self.timers, rates, ctx, conn)
        {
            // A PUBLISH held for subscription order resumes reading at its release.
            if !self.replication.order_waits.holds(conn) {
                ctx.resume_reading(conn);
            }
            self.unpark_if_free(ctx, conn);
        }
    }
}
