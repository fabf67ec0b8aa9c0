//! [`Shared`]: the state every shard and the runtime's handles share (mailboxes, shutdown
//! flag, exits, runtime-wide counters).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::clock::WakeShards;
use crate::datagram::ForwardInboxes;
use crate::exit::ExitBoard;
use crate::mailbox::Mailbox;
use crate::quiet::QuietBoard;

/// State every shard and the handle share: the mailboxes, the shutdown flag and how each
/// shard's thread ended.
pub(crate) struct Shared<M> {
    pub(crate) mailboxes: Vec<Mailbox<M>>,
    pub(crate) shutdown: AtomicBool,
    pub(crate) exits: Arc<ExitBoard>,
    /// Accepts refused for want of descriptors or memory, all shards together.
    pub(crate) accepts_refused: AtomicU64,
    /// Flushes that found a destination mailbox full, all shards together.
    pub(crate) mailbox_full: AtomicU64,
    /// Shards done at shutdown (`quiet.rs`).
    pub(crate) quiet: QuietBoard,
    /// Datagrams handed to the shard that owns their connection (`datagram/forward.rs`).
    pub(crate) forward: ForwardInboxes,
    /// Every shard's drains, when input fences are on (`fence.rs`).
    pub(crate) fences: Option<Arc<crate::fence::FenceBoard>>,
}

impl<M> Shared<M> {
    pub(crate) fn request_shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.wake_every_shard();
    }

    pub(crate) fn wake_every_shard(&self) {
        for mailbox in &self.mailboxes {
            mailbox.waker().wake();
        }
    }
}

impl<M: Send> WakeShards for Shared<M> {
    fn wake_all(&self) {
        self.wake_every_shard();
    }
}
