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

use super::rate_buckets::Buckets;
use super::timer_book::TimerPurpose;
use super::{BrokerShard, Ctx};
use crate::metrics::ShardCounters;

impl BrokerShard {
    /// A PUBLISH of `len` bytes (its whole packet) from `conn` was handled: charge it, and
    /// pause the connection when that put it in debt.
    pub(super) fn charge_publish(&mut self, ctx: &mut Ctx, conn: ConnId, len: usize) {
        let rates = self.shared.door.abuse.publish_rates();
        if !rates.any() {
            return;
        }
        let now = ctx.now();
        let bucket = self
            .door
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
        ShardCounters::add(&self.figures.counters().publishers_throttled, 1);
        debug!(
            pause_ms = until.saturating_duration_since(ctx.now()).as_millis(),
            "over the publish rate: reading paused"
        );
        self.arm_resume(ctx, conn, until);
    }

    fn arm_resume(&mut self, ctx: &mut Ctx, conn: ConnId, until: Instant) {
        let timer = self.timers.arm(ctx, until, TimerPurpose::Throttle(conn));
        match self.door.throttle.buckets.get_mut(&conn) {
            Some(bucket) => bucket.resume = Some(timer),
            None => self.timers.disarm(ctx, Some(timer)),
        }
    }

    /// The pause of `conn` is due to end: read it again unless it is still in debt (the limit
    /// was lowered meanwhile), then handle what waited in its carry.
    pub(super) fn throttle_elapsed(&mut self, ctx: &mut Ctx, conn: ConnId) {
        let rates = self.shared.door.abuse.publish_rates();
        let now = ctx.now();
        let Some(bucket) = self.door.throttle.buckets.get_mut(&conn) else {
            return;
        };
        bucket.resume = None;
        bucket.refill(rates, now);
        if let Some(wait) = bucket.debt_wait(rates) {
            self.arm_resume(ctx, conn, now + wait);
            return;
        }
        ctx.resume_reading(conn);
        self.unpark_if_free(ctx, conn);
    }

    /// `conn`'s keep-alive deadline: a connection paused for its publish rate is not read, so
    /// its silence is ours and it counts as active now.
    pub(super) fn keep_alive_while_throttled(
        &mut self,
        ctx: &Ctx,
        conn: ConnId,
        deadline: Instant,
    ) -> Instant {
        if ctx.now() < deadline || !self.door.throttle.is_throttled(conn) {
            return deadline;
        }
        let since_start = self.shared.time.since_start(ctx.now());
        let Some(connection) = self.conns.get_mut(&conn) else {
            return deadline;
        };
        connection.touch(since_start);
        connection
            .keep_alive_deadline(self.shared.time.started)
            .unwrap_or(deadline)
    }

    /// `conn` closed: forget its buckets.
    pub(super) fn throttle_closed(&mut self, ctx: &mut Ctx, conn: ConnId) {
        if let Some(bucket) = self.door.throttle.buckets.remove(&conn) {
            self.timers.disarm(ctx, bucket.resume);
        }
    }
}
