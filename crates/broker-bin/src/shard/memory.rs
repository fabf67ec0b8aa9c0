//! Handing freed memory back to the OS. The allocator keeps pages a shard allocated until that
//! shard collects them, even when another shard freed their contents (a message received here
//! and queued for a session there): after a large backlog is gone an idle broker would keep its
//! peak RSS. Once `limits.return_memory_after_bytes` of queued messages or partial frames have
//! been freed, the shard that notices asks every shard (itself included) to collect.

use ring_runtime::ShardId;
use tracing::debug;

use super::{BrokerShard, Ctx};
use crate::message::ShardMsg;

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
}
