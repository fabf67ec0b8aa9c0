//! The runtime's typed errors.

use std::io;
use std::net::SocketAddr;

use crate::ids::{ConnId, ShardId};

/// Everything that can go wrong in `ring-runtime`.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A configuration field is out of range.
    #[error("invalid runtime config `{key}`: {reason}")]
    InvalidConfig {
        /// The offending field of [`crate::RuntimeConfig`].
        key: &'static str,
        /// Why it is rejected.
        reason: String,
    },
    /// io_uring exists but lacks something the runtime needs.
    #[error("kernel too old for the io_uring backend: missing {missing}")]
    KernelTooOld {
        /// The missing opcode or feature.
        missing: &'static str,
    },
    /// io_uring is not available at all (ENOSYS, EPERM, `kernel.io_uring_disabled`).
    #[error("io_uring unavailable: {source}")]
    UringUnavailable {
        /// The error from `io_uring_setup`.
        source: io::Error,
    },
    /// `RLIMIT_MEMLOCK` is too small for the ring and its buffer ring.
    #[error("RLIMIT_MEMLOCK too low for io_uring: soft limit {limit_bytes} bytes")]
    MemlockTooLow {
        /// The soft limit in force.
        limit_bytes: u64,
    },
    /// Binding or listening on an address failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// Creating an outbound socket failed.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The peer address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// A system call the runtime depends on failed.
    #[error("{call} failed: {source}")]
    Syscall {
        /// The call (e.g. `epoll_create1`).
        call: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// Spawning a shard thread failed.
    #[error("cannot spawn shard thread {shard}: {source}")]
    Spawn {
        /// The shard.
        shard: ShardId,
        /// The OS error.
        source: io::Error,
    },
    /// The connection is closed, closing, or the id is stale.
    #[error("connection {conn:?} is closed")]
    ConnClosed {
        /// The connection.
        conn: ConnId,
    },
    /// A shard index outside `0..shard_count`.
    #[error("no shard {shard} (shard count {count})")]
    NoSuchShard {
        /// The requested shard.
        shard: ShardId,
        /// How many shards exist.
        count: usize,
    },
    /// The destination's mailbox is full and this shard's pending batch for it is at its bound.
    #[error("mailbox of shard {shard} is full ({pending} messages pending)")]
    MailboxFull {
        /// The destination shard.
        shard: ShardId,
        /// Messages kept for it on the sending shard.
        pending: usize,
    },
    /// A shard thread panicked.
    #[error("shard {shard} panicked")]
    ShardPanicked {
        /// The shard.
        shard: ShardId,
    },
}

impl RuntimeError {
    /// Wraps the last OS error of a failed system call.
    pub(crate) fn syscall(call: &'static str, source: io::Error) -> Self {
        Self::Syscall { call, source }
    }
}

/// Returned by [`crate::RuntimeHandle::post`] when the destination mailbox is full: the
/// messages come back to the caller, nothing is dropped.
#[derive(Debug, thiserror::Error)]
#[error("mailbox of shard {shard} is full")]
pub struct PostRejected<M> {
    /// The destination shard.
    pub shard: ShardId,
    /// The messages that were not delivered.
    pub messages: Vec<M>,
}
