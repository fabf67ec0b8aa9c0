//! Handing freed memory back to the OS. The allocator keeps pages a shard allocated until that
//! shard collects them, even when another shard freed their contents (a message received here
//! and queued for a session there): after a large backlog is gone an idle broker would keep its
//! peak RSS. Once `limits.return_memory_after_bytes` of queued messages or partial frames have
//! been freed, the shard that notices asks every shard (itself included) to collect. A shard
//! collects at once and once more [`COLLECT_SETTLE`] later, and not in between: frees that land
//! after the first collection (a backlog dropped over several turns) are caught by the second,
//! and a stream of large messages cycling through the partial-frame budget costs at most two
//! collections per interval.
//!
//! Freed pages otherwise stay with the allocator for `limits.free_memory_hold_ms` (its purge
//! delay) so that a busy shard reuses them without page faults; a shard only purges while it
//! allocates, though. So a shard that has been quiet for a [`QUIET_CHECK`] interval after it
//! worked collects ([`QuietWatch`](super::quiet::QuietWatch)), after shrinking the buffers a
//! burst grew (its route buffers and change reorder buffer here, the runtime's event lists,
//! write pool and receive buffers through `ShardCtx::release_idle_memory`), and once more
//! [`COLLECT_SETTLE`] later: the other shards' frees into its pages that came after (their own
//! quiet shrink) are only taken back by a collection of its own.
//!
//! What is armed lives in the shard's [`TimerBook`]; the work is its methods here.

use std::time::Duration;

use ring_runtime::ShardId;
use tracing::debug;

use super::quiet::QUIET_CHECK;
use super::timer_book::TimerPurpose;

use super::Ctx;
use super::parts::Figures;
use super::routes::Routes;
use super::timer_book::TimerBook;
use crate::message::{SentChange, ShardMsg};
use crate::shared::Shared;
use router::ReorderBuffer;

/// How long after collecting a shard collects once more (and not before).
const COLLECT_SETTLE: Duration = Duration::from_millis(500);

impl TimerBook {
    /// `ShardMsg::ReturnMemory`: collect now, unless a collection is already due shortly.
    pub(super) fn collect_freed_memory(&mut self, ctx: &mut Ctx) {
        if self.arm_collect_again(ctx) {
            ring_runtime::return_free_memory();
        }
    }

    /// Arms the trailing collection [`COLLECT_SETTLE`] from now; false when one is armed.
    fn arm_collect_again(&mut self, ctx: &mut Ctx) -> bool {
        if self.collect_armed {
            return false;
        }
        self.collect_armed = true;
        let at = ctx.now() + COLLECT_SETTLE;
        self.arm(ctx, at, TimerPurpose::CollectAgain);
        true
    }

    /// Arms a quiet check when the shard worked since it last collected.
    fn watch_quiet(&mut self, ctx: &mut Ctx) {
        if self.quiet.wants_check(ctx.now(), ctx.stats().busy_ns) {
            self.quiet.armed();
            let at = ctx.now() + QUIET_CHECK;
            self.arm(ctx, at, TimerPurpose::QuietCheck);
        }
    }

    /// The trailing collection of a burst.
    pub(super) fn collect_again(&mut self) {
        self.collect_armed = false;
        ring_runtime::return_free_memory();
    }

    /// At the end of a turn: when enough bytes were freed since the last collection, asks every
    /// shard to hand its free memory back (two relaxed loads when not).
    pub(super) fn return_freed_memory(
        &mut self,
        shared: &Shared,
        figures: &Figures,
        ctx: &mut Ctx,
    ) {
        self.watch_quiet(ctx);
        let threshold = shared.config.limits.return_memory_after_bytes;
        let queued = shared.limits.queues.budget.take_released(threshold);
        let partial = shared.limits.partial_frames.take_released(threshold);
        if !queued && !partial {
            return;
        }
        debug!(
            threshold,
            "freed memory past the threshold: every shard collects"
        );
        for index in 0..ctx.shard_count() {
            figures.post(ctx, ShardId::new(index as u16), ShardMsg::ReturnMemory);
        }
    }

    /// `TimerPurpose::QuietCheck`: collects if the shard has been quiet since the last check.
    pub(super) fn quiet_check(
        &mut self,
        routes: &mut Routes,
        changes: &mut ReorderBuffer<SentChange>,
        ctx: &mut Ctx,
    ) {
        if self.quiet.check(ctx.now(), ctx.stats().busy_ns) {
            debug!("shard quiet: shrinks what a burst grew, hands its free memory back");
            routes.shrink_spare();
            changes.shrink_to_fit();
            ctx.release_idle_memory();
            // Blocks other shards free here after this turn's collection (their own quiet
            // shrink, say) come back to this thread's pages only when it collects again.
            self.arm_collect_again(ctx);
        }
    }
}
