//! `[runtime]`: the I/O backend, threads, buffers and write pacing.

use std::time::Duration;

/// Which I/O backend the runtime uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// io_uring when the kernel offers it, else epoll.
    Auto,
    /// io_uring, failing if it is unavailable.
    Uring,
    /// epoll.
    Epoll,
}

/// How long write pacing holds a stream (`runtime.write_pacing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePacingChoice {
    /// Nothing while a shard has idle time, up to `write_interval` once it is busy.
    Adaptive,
    /// Always `write_interval`.
    Fixed,
}

/// `[runtime]`
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    /// Shard count; `None` means one per available core.
    pub shards: Option<usize>,
    pub backend: BackendChoice,
    /// Replicated changes held ahead of a missing one before it is reported (never refused).
    pub max_pending_changes: usize,
    /// Message batches one shard's mailbox holds.
    pub mailbox_batches: usize,
    /// Messages a shard keeps for one destination whose mailbox is full before deliveries to
    /// it are dropped (control messages are never dropped).
    pub max_pending_posts: usize,
    /// Write pacing interval: the longest hold (zero: off).
    pub write_interval: std::time::Duration,
    /// Whether the hold follows the shard's load or is always the interval.
    pub write_pacing: WritePacingChoice,
    /// The scheduler slice shard threads ask for; `None` keeps the kernel's.
    pub sched_slice: Option<Duration>,
    /// Whether each shard thread is pinned to one core.
    pub pin_threads: bool,
    /// Whether a pinned shard that keeps waiting for its core unpins itself.
    pub unpin_when_shared: bool,
    /// Frames shorter than this are copied into one send buffer per connection.
    pub coalesce_below: usize,
    /// Emptied send queues each shard keeps for reuse.
    pub spare_send_queues: usize,
    /// `listen(2)` backlog per shard listener; `None`: the kernel's maximum.
    pub listen_backlog: Option<i32>,
    /// How long accepting pauses after an accept ran out of file descriptors.
    pub accept_backoff: Duration,
    /// Receive buffers per shard (io_uring provided-buffer ring; a power of two).
    pub recv_buffers: u16,
    /// Bytes per receive buffer (also the epoll backend's read chunk).
    pub recv_buffer_size: u32,
    /// Whether a SUBSCRIBE the broker received before a PUBLISH takes effect for it whichever
    /// shards read them (`"received"`: the runtime's input fences), not only one a shard had
    /// handled (`"handled"`).
    pub strict_subscribe_order: bool,
    /// With `strict_subscribe_order`, the most bytes of messages a shard keeps for
    /// subscriptions that may precede them (`shard/order_kept.rs`).
    pub subscribe_order_keep_bytes: usize,
}
