//! The handler's side of the input fences (`fence.rs`): asking for one, and whether it passed.

use crate::ctx::ShardCtx;
use crate::fence::{FenceMarks, InputFence, InputStamp};

impl<M> ShardCtx<M> {
    /// A fence over the input every other shard had received when this turn's input was
    /// harvested: it passes once each of them has handed its handler what reached it before
    /// then, or sleeps with nothing unhandled ([`Self::input_fence_passed`]; the handler's
    /// [`crate::Handler::on_input_fences_passed`] is called when fences pass). Asked softly:
    /// the other shards make their next look a drain but may sleep, and nobody hurries; a
    /// handler that waits for it calls [`Self::insist_on_input_fence`]. One per turn:
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

    /// The handler waits for `fence`: the shards it marked do not block before they have
    /// made a drain, and wake this one when they have handled it.
    pub fn insist_on_input_fence(&mut self, fence: InputFence) {
        if let Some(book) = self.fences.as_mut() {
            book.insist(fence);
        }
    }

    /// Whether `fence` has passed (as of this turn's start).
    pub fn input_fence_passed(&self, fence: InputFence) -> bool {
        self.fences.as_ref().is_none_or(|book| book.passed(fence))
    }

    /// When this turn's input was taken from the kernel, for other shards' fences
    /// ([`FenceMarks::may_precede`]); the default stamp when fences are off.
    pub fn input_stamp(&self) -> InputStamp {
        self.fences
            .as_ref()
            .map_or_else(InputStamp::default, |book| book.turn_stamp())
    }

    /// What `fence` marked on the other shards, while it has not passed: the input they took
    /// that may have reached them before it ([`FenceMarks::may_precede`]).
    pub fn input_fence_marks(&self, fence: InputFence) -> Option<FenceMarks> {
        self.fences.as_ref().and_then(|book| book.marks(fence))
    }
}
