//! The handler's side of the input fences (`fence.rs`): asking for one, and whether it passed.

use crate::ctx::ShardCtx;
use crate::fence::InputFence;

impl<M> ShardCtx<M> {
    /// A fence over the input every other shard had received when this turn's input was
    /// harvested: it passes once each of them has handed its handler what reached it before
    /// then ([`Self::input_fence_passed`]; the handler's
    /// [`crate::Handler::on_input_fences_passed`] is called when fences pass). One per turn:
    /// asked again in the same turn, it is the same fence. [`InputFence::PASSED`] when no
    /// other shard had input left to handle, with one shard, or when
    /// [`crate::RuntimeConfig::input_fences`] is off. A fence that waits
    /// [`crate::INPUT_FENCE_PATIENCE`] passes anyway (counted).
    ///
    /// [`InputFence::PASSED`]: InputFence::PASSED
    pub fn input_fence(&mut self) -> InputFence {
        let now = self.now;
        (self.fences.as_mut()).map_or(InputFence::PASSED, |book| book.fence(now))
    }

    /// Whether `fence` has passed (as of this turn's start).
    pub fn input_fence_passed(&self, fence: InputFence) -> bool {
        self.fences.as_ref().is_none_or(|book| book.passed(fence))
    }
}
