//! What the operations listener reads: the broker's shared state, the shards' exits, the admin
//! port, and the broker's lifecycle (serving, shutting down). Nothing here is written per
//! request: every read is of atomics the shards keep.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ring_runtime::{BackendKind, ShardExits};

use crate::shared::Shared;
use admin::AdminPort;

/// Where the broker is in its life, for `/readyz`.
#[derive(Debug, Default)]
pub struct Lifecycle {
    serving: AtomicBool,
    stopping: AtomicBool,
}

impl Lifecycle {
    /// The broker has started every shard and serves clients.
    pub fn set_serving(&self) {
        self.serving.store(true, Ordering::Release);
    }

    /// A shutdown has begun.
    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Serving and not shutting down.
    pub fn serving(&self) -> bool {
        self.serving.load(Ordering::Acquire) && !self.stopping.load(Ordering::Acquire)
    }
}

/// Everything the operations listener's answers are made of.
pub struct OpsState {
    pub(crate) shared: Arc<Shared>,
    pub(crate) exits: ShardExits,
    pub(crate) admin: AdminPort,
    pub(crate) lifecycle: Arc<Lifecycle>,
    pub(crate) backend: BackendKind,
    /// Whether the broker has a QUIC listener (its `ringmq_quic_*` families are shown).
    pub(crate) quic_listeners: bool,
}

impl OpsState {
    /// The `backend` label of `ringmq_info`.
    pub(crate) fn backend_label(&self) -> &'static str {
        match self.backend {
            BackendKind::Uring => "io_uring",
            BackendKind::Epoll => "epoll",
        }
    }

    /// Shards that have ended, by index.
    pub(crate) fn ended_shards(&self) -> Vec<usize> {
        let mut ended: Vec<usize> = self
            .exits
            .so_far()
            .iter()
            .map(|exit| exit.shard.index())
            .collect();
        ended.sort_unstable();
        ended.dedup();
        ended
    }

    /// Whether overload mode refuses new connections now.
    pub(crate) fn overloaded(&self) -> bool {
        let since_start = self
            .shared
            .time
            .clock
            .now()
            .saturating_duration_since(self.shared.time.started);
        self.shared.door.abuse.refuses_connections(since_start)
    }
}
