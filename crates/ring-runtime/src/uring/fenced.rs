//! The io_uring backend's looks at the kernel: one enter that may block, or, when other shards
//! fence this shard's input (`fence.rs`), a *drain* when another shard wants or asks for one,
//! and a blocking wait only flagged asleep.

use std::time::Duration;

use super::UringBackend;
use crate::error::RuntimeError;
use crate::fence::FenceSide;

/// `IORING_ENTER_GETEVENTS`.
const ENTER_GETEVENTS: u32 = 1;
/// Task work items one run takes with `DEFER_TASKRUN` (the kernel's
/// `IO_LOCAL_TW_DEFAULT_MAX`; earlier kernels take all of them).
const RUN_LIMIT: usize = 20;
/// Enters of a drain before it gives up for the turn.
const MAX_ENTERS: usize = 4096;

impl UringBackend {
    /// One look at the kernel; returns the drain it was, if any. The completions are in the
    /// backlog afterwards.
    pub(super) fn look(
        &mut self,
        timeout: Option<Duration>,
        fence: Option<&FenceSide<'_>>,
    ) -> Result<Option<u64>, RuntimeError> {
        let Some(side) = fence else {
            self.submit_and_wait(timeout)?;
            self.reap();
            return Ok(None);
        };
        let input = side.input();
        let blocks = timeout != Some(Duration::ZERO);
        // A look that may block answers a soft ask too: under a flood nothing of the shard's
        // own may be waiting (no dirty connection) while the kernel holds its input, and such
        // a look returns at once with a run of task work, no drain; the fences asking would
        // then wait out their patience.
        let drains = input.drain_asked() || (blocks && !input.fall_asleep());
        if drains {
            return self.drain(side);
        }
        let waited = self.submit_and_wait(timeout);
        if blocks {
            input.wake_up();
        }
        waited?;
        self.reap();
        Ok(None)
    }

    /// Submits what is queued and runs every task work item the kernel holds for the ring,
    /// without waiting; the completions go to the backlog. One enter runs at most
    /// [`RUN_LIMIT`] items per pass and keeps the rest for the next, so the drain enters until
    /// one brings fewer completions than that: the kernel then had no more items (each item
    /// completes at least once, except a receive woken without data, which a drain can only
    /// miss behind [`RUN_LIMIT`] such). A timed enter asking for the whole queue would run
    /// them all in one, but it arms a timer and gives the CPU away until it fires. Under a
    /// flood that never lets an enter come short, the look ends after [`MAX_ENTERS`] and is
    /// no drain (`None`); the next turn tries again.
    fn drain(&mut self, side: &FenceSide<'_>) -> Result<Option<u64>, RuntimeError> {
        let drain = side.input().begin_drain();
        for _ in 0..MAX_ENTERS {
            let before = self.backlog.len();
            self.enter_for_events()?;
            self.reap();
            if self.backlog.len() - before < RUN_LIMIT {
                return Ok(Some(drain));
            }
        }
        Ok(None)
    }

    /// One enter that submits what is queued and runs task work, never blocking.
    fn enter_for_events(&mut self) -> Result<(), RuntimeError> {
        let queued = self.ring.submission().len() as u32;
        // SAFETY: no argument pointer is passed; the entries submitted were pushed under the
        // contract of `push`.
        let entered = unsafe {
            self.ring
                .submitter()
                .enter::<libc::sigset_t>(queued, 0, ENTER_GETEVENTS, None)
        };
        match entered {
            Ok(_) => Ok(()),
            Err(error) => match error.raw_os_error() {
                Some(libc::EINTR | libc::EBUSY | libc::EAGAIN) => Ok(()),
                _ => Err(RuntimeError::syscall("io_uring_enter", error)),
            },
        }
    }
}
