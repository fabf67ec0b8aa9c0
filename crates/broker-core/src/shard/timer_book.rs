//! The shard's timer book: the runtime's timer wheel carries a `u64` key; this book maps it to
//! what the timer is for ([`TimerPurpose`]). `timers.rs` arms, cancels and fires through it.

use std::collections::HashMap;

use std::time::{Duration, Instant};

use codec::MqttStr;
use ring_runtime::{ConnId, TimerId};

use ring_runtime::ShardCtx;

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
    LifecycleSummary(crate::lifecycle::Lifecycle),
    /// Grant re-checks are submitted again after the auth workers were busy
    /// (`grant_recheck.rs`).
    RecheckRetry,
    /// A delayed message (`$delayed/`) is due (`delayed.rs`): its id.
    Delayed(u64),
}

/// A timer armed through the book: its runtime id and its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArmedTimer {
    pub(super) id: TimerId,
    pub(super) key: u64,
}

/// Live timer keys and their purposes.
#[derive(Debug, Default)]
pub struct TimerBook {
    pub(super) next_key: u64,
    pub(super) purposes: HashMap<u64, TimerPurpose>,
    pub(super) backlog_armed: bool,
    /// A trailing collection is armed (`memory.rs`).
    pub(super) collect_armed: bool,
    /// Whether the shard has gone quiet (`memory.rs`).
    pub(super) quiet: super::quiet::QuietWatch,
    /// The deadline sweep is armed (`deadlines.rs`).
    pub(super) sweep_armed: bool,
    /// Recovered sessions whose timers are armed when the shard starts (`recover.rs`).
    pub(super) recovered: Vec<MqttStr>,
    /// When each recovered session that was disconnected at the restart disconnected.
    pub(super) recovered_down_since: Vec<(MqttStr, std::time::SystemTime)>,
}

impl TimerBook {
    /// Arms a timer for `purpose` at `deadline`.
    pub(super) fn arm<M>(
        &mut self,
        ctx: &mut ShardCtx<M>,
        deadline: Instant,
        purpose: TimerPurpose,
    ) -> ArmedTimer {
        let key = self.next_key;
        self.next_key += 1;
        self.purposes.insert(key, purpose);
        ArmedTimer {
            id: ctx.arm_timer_at(deadline, key),
            key,
        }
    }

    /// Arms the backlog retry timer, `retry` from now, unless it is armed already.
    pub(super) fn arm_backlog_retry<M>(&mut self, ctx: &mut ShardCtx<M>, retry: Duration) {
        if !self.backlog_armed {
            self.backlog_armed = true;
            self.arm(ctx, ctx.now() + retry, TimerPurpose::Backlog);
        }
    }

    /// Cancels a timer armed with [`Self::arm`] and forgets its purpose.
    pub(super) fn disarm<M>(&mut self, ctx: &mut ShardCtx<M>, timer: Option<ArmedTimer>) {
        if let Some(timer) = timer {
            ctx.cancel_timer(timer.id);
            self.purposes.remove(&timer.key);
        }
    }
}
