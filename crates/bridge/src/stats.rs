//! Per-bridge counters, read by `Broker::bridge_stats` (for `/metrics`) and `$SYS`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use broker_api::BridgeStats;

/// A bridge's live counters, shared by its thread and the readers of its figures.
#[derive(Debug, Default)]
pub struct BridgeCounters {
    connected: AtomicBool,
    messages_in: AtomicU64,
    messages_out: AtomicU64,
    dropped: AtomicU64,
    reconnects: AtomicU64,
}

impl BridgeCounters {
    pub(crate) fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::Relaxed);
    }

    pub(crate) fn count_in(&self) {
        self.messages_in.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_out(&self) {
        self.messages_out.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_reconnect(&self) {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// The figures now, under `name`.
    pub fn snapshot(&self, name: &str) -> BridgeStats {
        BridgeStats {
            name: name.to_owned(),
            connected: self.connected.load(Ordering::Relaxed),
            messages_in: self.messages_in.load(Ordering::Relaxed),
            messages_out: self.messages_out.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            reconnects: self.reconnects.load(Ordering::Relaxed),
        }
    }
}
