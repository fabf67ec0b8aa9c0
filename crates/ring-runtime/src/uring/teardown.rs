//! Tearing the backend down on every exit path, not only the graceful one.
//!
//! A shard whose loop fails or whose handler panics drops its backend with operations still
//! in flight: receives into the buffer ring, writes from boxed batches, the wake-up read. The
//! kernel may touch their memory until their last completion, so `Drop` cancels everything and
//! reaps completions (bounded by `RuntimeConfig::cancel_timeout`). Whatever is still in flight
//! after that is leaked, not freed: the op table's entries and the buffer ring's mappings stay
//! allocated for the life of the process.

use std::time::Instant;

use io_uring::cqueue;

use super::ops::Op;
use super::{Completion, UringBackend};

impl UringBackend {
    /// Asks the kernel to cancel every operation in flight (cancel requests excepted).
    pub(super) fn cancel_everything(&mut self) {
        for key in self.ops.keys() {
            if !matches!(self.ops.get_mut(key), Some(Op::Cancel)) {
                self.cancel(key);
            }
        }
    }

    /// Cancels everything and reaps completions without handling them until the op table is
    /// empty or `cancel_timeout` has passed. Returns whether every operation has ended.
    fn cancel_and_reap(&mut self) -> bool {
        self.quiescing = true;
        self.cancel_everything();
        let deadline = Instant::now() + self.cancel_timeout;
        loop {
            for completion in std::mem::take(&mut self.backlog) {
                self.forget(completion);
            }
            if self.ops.len() == 0 {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.submit_and_wait(Some(left)).is_err() {
                return false;
            }
            self.reap();
        }
    }

    /// Drops the operation a completion ends (its buffers are the kernel's no more).
    fn forget(&mut self, completion: Completion) {
        if !cqueue::more(completion.flags) {
            self.ops.remove(completion.user_data);
        }
    }
}

impl Drop for UringBackend {
    fn drop(&mut self) {
        if self.ops.len() == 0 {
            return;
        }

        if !self.cancel_and_reap() {
            // The kernel may still use these: keep them, never free them under it.
            self.ops.leak();
            self.buf_ring.leak();
            self.udp.leak();
        }
    }
}
