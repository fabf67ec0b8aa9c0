//! Arming, cancelling and firing the shard's timers through its book (`timer_book.rs`).

use std::time::Instant;

use super::timer_book::{ArmedTimer, TimerPurpose};
use super::{BrokerShard, Ctx};
use crate::session::Session;

impl BrokerShard {
    /// Arms a timer for `purpose` at `deadline`.
    pub(super) fn arm(
        &mut self,
        ctx: &mut Ctx,
        deadline: Instant,
        purpose: TimerPurpose,
    ) -> ArmedTimer {
        let key = self.timers.next_key;
        self.timers.next_key += 1;
        self.timers.purposes.insert(key, purpose);
        ArmedTimer {
            id: ctx.arm_timer_at(deadline, key),
            key,
        }
    }

    /// Arms the backlog retry timer unless it is armed already.
    pub(super) fn arm_backlog_retry(&mut self, ctx: &mut Ctx) {
        if !self.timers.backlog_armed {
            self.timers.backlog_armed = true;
            let at = ctx.now() + self.shared.config.queues.backlog_retry;
            self.arm(ctx, at, TimerPurpose::Backlog);
        }
    }

    /// Cancels a timer armed with [`Self::arm`] and forgets its purpose.
    pub(super) fn disarm(&mut self, ctx: &mut Ctx, timer: Option<ArmedTimer>) {
        if let Some(timer) = timer {
            ctx.cancel_timer(timer.id);
            self.timers.purposes.remove(&timer.key);
        }
    }

    /// Cancels a session's expiry and will-delay timers.
    pub(super) fn disarm_session_timers(&mut self, ctx: &mut Ctx, session: &mut Session) {
        let timers = session.take_timers();
        self.disarm(ctx, timers.expiry);
        self.disarm(ctx, timers.will);
    }

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
            TimerPurpose::CollectAgain => self.collect_again(),
            TimerPurpose::QuietCheck => self.quiet_check(ctx),
            TimerPurpose::DeadlineSweep => self.sweep_deadlines(ctx),
            TimerPurpose::CredentialsExpired(conn) => self.credentials_expired(ctx, conn),
            TimerPurpose::Throttle(conn) => self.throttle_elapsed(ctx, conn),
            TimerPurpose::LifecycleSummary(kind) => self.lifecycle_summary_due(kind),
            TimerPurpose::RecheckRetry => self.recheck_retry_due(),
        }
    }
}
