//! Accept back-off: when an accept fails for want of descriptors or memory the backend stops
//! accepting on that listener, and the shard resumes it after `RuntimeConfig::accept_backoff`
//! with its timer wheel, warning once per pause with the number of refused accepts.

use std::io;
use std::sync::atomic::Ordering;

use super::Shard;
use crate::backend::Backend;
use crate::ctx::TimerTarget;
use crate::error::RuntimeError;
use crate::handler::Handler;

impl<H: Handler, B: Backend> Shard<H, B> {
    /// A listener refused an accept: count it; start a pause unless one is running.
    pub(super) fn accept_refused(&mut self, error: &io::Error) {
        self.ctx.stats.accepts_refused += 1;
        self.shared.accepts_refused.fetch_add(1, Ordering::Relaxed);
        let pause = &mut self.accept_pause;
        pause.refused += 1;
        if pause.paused {
            return;
        }
        pause.paused = true;
        let deadline = self.ctx.now + pause.backoff;
        self.ctx.timers.insert(deadline, TimerTarget::ResumeAccept);
        tracing::warn!(
            shard = %self.ctx.shard,
            refused = pause.refused,
            %error,
            backoff_ms = pause.backoff.as_millis(),
            "accept refused (out of file descriptors or memory): pausing accepts"
        );
        pause.refused = 0;
    }

    /// The pause is over: resume after this turn's timers.
    pub(super) fn accept_pause_over(&mut self) {
        self.accept_pause.paused = false;
        self.accept_pause.resume_due = true;
    }

    /// Re-arms the paused listeners when the pause ended this turn.
    pub(super) fn resume_accepting_if_due(&mut self) -> Result<(), RuntimeError> {
        if std::mem::take(&mut self.accept_pause.resume_due) {
            self.backend.resume_accepting()?;
        }
        Ok(())
    }
}
