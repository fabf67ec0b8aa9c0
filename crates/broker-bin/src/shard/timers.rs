//! The shard's timer purposes: the runtime's timer wheel carries a `u64` key; this book maps it
//! to what the timer is for.

use std::collections::HashMap;
use std::time::Instant;

use codec::MqttStr;
use ring_runtime::{ConnId, TimerId};

use super::{BrokerShard, Ctx};
use crate::session::Session;

/// What a timer is for.
#[derive(Debug, Clone)]
pub enum TimerPurpose {
    /// A disconnected session's expiry.
    SessionExpiry(MqttStr),
    /// A disconnected session's delayed will.
    WillDelay(MqttStr),
    /// The next `$SYS` update.
    Sys,
    /// Retry sending to backlogged connections.
    Backlog,
    /// A session's move waits too long for its fences (a lost fence: a mailbox over its bound).
    FencesOverdue(router::SubscriberId),
    /// The trailing collection after a burst of frees or a quiet collection (`memory.rs`).
    CollectAgain,
    /// A look whether the shard has gone quiet, to hand its free memory back (`memory.rs`).
    QuietCheck,
    /// The connections' CONNECT-timeout and keep-alive deadlines are checked
    /// (`deadlines.rs`).
    DeadlineSweep,
    /// A client's credentials expire (a JWT's `exp`): it is disconnected.
    CredentialsExpired(ConnId),
    /// The end of a connection's pause for its publish rate (`throttle.rs`).
    Throttle(ConnId),
    /// The summary of suppressed lifecycle lines of one kind is due (`lifecycle.rs`).
    LifecycleSummary(crate::logging::Lifecycle),
}

/// A timer armed through the book: its runtime id and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmedTimer {
    id: TimerId,
    key: u64,
}

/// Live timer keys and their purposes.
#[derive(Debug, Default)]
pub struct TimerBook {
    next_key: u64,
    purposes: HashMap<u64, TimerPurpose>,
    backlog_armed: bool,
    /// A trailing collection is armed (`memory.rs`).
    pub(super) collect_armed: bool,
    /// Whether the shard has gone quiet (`memory.rs`).
    pub(super) quiet: super::memory::QuietWatch,
    /// The deadline sweep is armed (`deadlines.rs`).
    pub(super) sweep_armed: bool,
}

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
        }
    }
}
