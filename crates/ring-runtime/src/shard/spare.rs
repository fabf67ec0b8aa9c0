//! Memory a burst left behind: the shard's working lists grow to the largest turn they
//! served (thousands of accept events in a connection storm, say) and keep that capacity.
//! When the handler says the shard has gone quiet ([`crate::ShardCtx::release_idle_memory`]),
//! the end of the turn shrinks them to what they hold, drops the emptied send queues the thread
//! kept, has the backend hand back its idle receive buffers' pages, and hands the thread's free
//! memory back.

use super::Shard;
use crate::backend::Backend;
use crate::handler::Handler;

impl<H: Handler, B: Backend> Shard<H, B> {
    /// Shrinks every per-turn list and the backend's, then returns free memory to the OS.
    pub(super) fn release_idle_memory(&mut self) {
        self.turn.events.shrink_to_fit();
        self.turn.fired.shrink_to_fit();
        self.turn.spare_dirty.shrink_to_fit();
        self.turn.ended.shrink_to_fit();
        self.turn.failed_connects.shrink_to_fit();
        self.ctx.conns.shrink_dirty();
        self.ctx.outboxes.shrink_batches();
        self.ctx.local_inbox.shrink();
        self.backend.shrink_spare();
        self.shrink_datagrams();
        crate::send_queue::drop_spare_queues();
        crate::return_free_memory();
    }
}
