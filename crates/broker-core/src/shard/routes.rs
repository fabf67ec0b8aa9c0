//! Per-turn routing state: the reused match buffer and scratch space, the frame cache, the
//! per-destination batches (flushed once a turn), and connections whose send queue was over
//! its bound (retried from `drain_backlog`).

use bytes::BytesMut;
use ring_runtime::ConnId;
use router::Matches;

use super::{FastSet, frame_cache};
use crate::message::CopyBatch;

/// Buffers reused across routing calls.
pub(super) struct Routes {
    pub(super) matches: Matches,
    pub(super) scratch: BytesMut,
    pub(super) frame_cache: frame_cache::FrameCache,
    /// Copies for other shards' sessions, one batch per destination shard.
    pub(super) route_buf: Vec<CopyBatch>,
    /// Copies forwarded after their session moved, one batch per destination shard.
    pub(super) forward_buf: Vec<CopyBatch>,
    /// Connections waiting for room in their send queue.
    pub(super) backlog: FastSet<ConnId>,
}

impl Routes {
    /// Empty buffers for a broker of `shard_count` shards.
    pub(super) fn new(shard_count: usize) -> Self {
        Self {
            matches: Matches::new(),
            scratch: BytesMut::new(),
            frame_cache: frame_cache::FrameCache::default(),
            route_buf: (0..shard_count).map(|_| CopyBatch::default()).collect(),
            forward_buf: (0..shard_count).map(|_| CopyBatch::default()).collect(),
            backlog: FastSet::default(),
        }
    }

    /// Shrinks the per-destination buffers to what they hold (after a burst).
    pub(super) fn shrink_spare(&mut self) {
        let buffers = self.route_buf.iter_mut().chain(self.forward_buf.iter_mut());
        buffers.for_each(CopyBatch::shrink_to_fit);
        self.backlog.shrink_to_fit();
    }
}
