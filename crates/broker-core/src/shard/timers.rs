//! Arming, cancelling and firing the shard's timers through its book (`timer_book.rs`).

use super::timer_book::{TimerBook, TimerPurpose};
use super::{BrokerShard, Ctx};
use crate::session::Session;

impl TimerBook {
    /// Cancels a session's expiry and will-delay timers.
    pub(super) fn disarm_session_timers(&mut self, ctx: &mut Ctx, session: &mut Session) {
        let timers = session.take_timers();
        self.disarm(ctx, timers.expiry);
        self.disarm(ctx, timers.will);
    }
}

impl BrokerShard {
    /// A timer fired: run its purpose.
    pub(super) fn timer_fired(&mut self, ctx: &mut Ctx, key: u64) {
        let Some(purpose) = self.timers.purposes.remove(&key) else {
            return;
        };
        match purpose {
            TimerPurpose::SessionExpiry(client_id) => self.session_expired(ctx, &client_id),
            TimerPurpose::WillDelay(client_id) => self.will_delay_elapsed(ctx, &client_id),
            TimerPurpose::Sys => self.publish_sys(ctx),
            TimerPurpose::Backlog => {
                self.timers.backlog_armed = false;
                self.drain_backlog(ctx);
            }
            TimerPurpose::FencesOverdue(subscriber) => self.fences_overdue(ctx, subscriber),
            TimerPurpose::CollectAgain => self.timers.collect_again(),
            TimerPurpose::QuietCheck => self.timers.quiet_check(
                &mut self.delivery.routes,
                &mut self.replication.replica.changes,
                ctx,
            ),
            TimerPurpose::DeadlineSweep => self.sweep_deadlines(ctx),
            TimerPurpose::CredentialsExpired(conn) => self.credentials_expired(ctx, conn),
            TimerPurpose::Throttle(conn) => self.throttle_elapsed(ctx, conn),
            TimerPurpose::LifecycleSummary(kind) => self.shared.lifecycle.summarise(kind),
            TimerPurpose::RecheckRetry => self.auth.rechecks.recheck_retry_due(),
            TimerPurpose::Delayed(id) => self.delayed_due(ctx, id),
        }
    }
}
