//! Handing freed memory back to the OS. The allocator keeps pages a shard allocated until that
//! shard collects them, even when another shard freed their contents (a message received here
//! and queued for a session there): after a large backlog is gone an idle broker would keep its
//! peak RSS. Once `limits.return_memory_after_bytes` of queued messages or partial frames have
//! been freed, the shard that notices asks every shard (itself included) to collect. A shard
//! collects at once and once more [`COLLECT_SETTLE`] later, and not in between: frees that land
//! after the first collection (a backlog dropped over several turns) are caught by the second,
//! and a stream of large messages cycling through the partial-frame budget costs at most two
//! collections per interval.

use std::time::Duration;

use ring_runtime::ShardId;
use tracing::debug;

use super::timers::TimerPurpose;

use super::{BrokerShard, Ctx};
use crate::message::ShardMsg;

/// How long after collecting a shard collects once more (and not before).
const COLLECT_SETTLE: Duration = Duration::from_millis(500);

impl BrokerShard {
    /// At the end of a turn: when enough bytes were freed since the last collection, asks every
    /// shard to hand its free memory back (two relaxed loads when not).
    pub(super) fn return_freed_memory(&mut self, ctx: &mut Ctx) {
        let threshold = self.shared.config.limits.return_memory_after_bytes;
        let queued = self.shared.queue_limits.budget.take_released(threshold);
        let partial = self.shared.partial_frames.take_released(threshold);
        if !queued && !partial {
            return;
        }
        debug!(
            threshold,
            "freed memory past the threshold: every shard collects"
        );
        for index in 0..ctx.shard_count() {
            self.post(ctx, ShardId::new(index as u16), ShardMsg::ReturnMemory);
        }
    }

    /// `ShardMsg::ReturnMemory`: collect now, unless a collection is already due shortly.
    pub(super) fn collect_freed_memory(&mut self, ctx: &mut Ctx) {
        if self.timers.collect_armed {
            return;
        }
        ring_runtime::return_free_memory();
        self.timers.collect_armed = true;
        let at = ctx.now() + COLLECT_SETTLE;
        self.arm(ctx, at, TimerPurpose::CollectAgain);
    }

    /// The trailing collection of a burst.
    pub(super) fn collect_again(&mut self) {
        self.timers.collect_armed = false;
        ring_runtime::return_free_memory();
    }
}
