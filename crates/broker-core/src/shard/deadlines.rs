//! Connection deadlines without a timer per connection: the CONNECT timeout before CONNACK and
//! the keep-alive after it ([`crate::conn::Connection::deadline`]). One sweep per shard looks
//! at every connection once per interval (at most [`SWEEP_EVERY`]); a deadline is acted on at
//! most one interval late. A timer per connection cost a timer-wheel slot (40 B) and its id in
//! the connection record for every idle client; the sweep reads each record once per
//! interval instead.

use std::time::{Duration, Instant};

use ring_runtime::ConnId;
use tracing::debug;

use super::parts::Wire;
use super::rate_buckets::Throttle;
use super::timer_book::{TimerBook, TimerPurpose};
use super::{BrokerShard, Ctx};
use crate::conn::Connections;
use codec::ReasonCode;

/// The longest between two sweeps.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// The shortest (a CONNECT timeout under two seconds sweeps twice per timeout).
const SWEEP_AT_LEAST: Duration = Duration::from_millis(50);

impl BrokerShard {
    /// The sweep is due: every connection whose deadline has passed is dealt with.
    pub(super) fn sweep_deadlines(&mut self, ctx: &mut Ctx) {
        self.timers.sweep_armed = false;
        let now = ctx.now();
        let started = self.shared.time.started;
        let timeout = self.shared.config.connection.connect_timeout;
        let due: Vec<(ConnId, Instant)> = self
            .conns
            .iter()
            .filter_map(|(id, c)| Some((id, c.deadline(started, timeout)?)))
            .filter(|(_, deadline)| now >= *deadline)
            .collect();
        for (conn, deadline) in due {
            let _span = self.conns.span(&self.sessions, self.id, conn).entered();
            let mut wire = Wire::new(
                &mut self.conns,
                &mut self.delivery.routes,
                &self.figures,
                &self.shared,
            );
            wire.deadline_passed(&self.door.throttle, ctx, conn, deadline);
        }
        self.timers.arm_deadline_sweep(
            ctx,
            &self.conns,
            self.shared.config.connection.connect_timeout,
        );
    }
}

/// How often connections' deadlines are swept for a CONNECT timeout of `connect_timeout`: half
/// of it, within [`SWEEP_AT_LEAST`] and [`SWEEP_EVERY`].
fn sweep_interval(connect_timeout: Duration) -> Duration {
    (connect_timeout / 2).clamp(SWEEP_AT_LEAST, SWEEP_EVERY)
}

impl Wire<'_> {
    /// `conn`'s deadline has passed: no CONNECT in time closes it; a keep-alive that ran out
    /// (a connection paused for its publish rate in `throttle` excepted) disconnects it.
    fn deadline_passed(
        &mut self,
        throttle: &Throttle,
        ctx: &mut Ctx,
        conn: ConnId,
        deadline: Instant,
    ) {
        if !self.conns.get(&conn).is_some_and(|c| c.is_connected()) {
            debug!("no CONNECT in time: closing");
            ctx.abort(conn);
            return;
        }
        let deadline =
            throttle.keep_alive_while_throttled(self.conns, &self.shared.time, ctx, conn, deadline);
        if ctx.now() >= deadline {
            debug!("keep-alive expired");
            self.send_disconnect(ctx, conn, ReasonCode::KeepAliveTimeout);
            self.close_connection(ctx, conn);
        }
    }
}

impl TimerBook {
    /// Arms the sweep, unless it is armed or the shard holds no connection.
    pub(super) fn arm_deadline_sweep(
        &mut self,
        ctx: &mut Ctx,
        conns: &Connections,
        connect_timeout: Duration,
    ) {
        if self.sweep_armed || conns.is_empty() {
            return;
        }
        self.sweep_armed = true;
        let at = ctx.now() + sweep_interval(connect_timeout);
        self.arm(ctx, at, TimerPurpose::DeadlineSweep);
    }
}
