//! [`QuicCounters`]: what every shard's QUIC driver counts, for `/metrics`
//! (`ringmq_quic_*`). One set per broker, shared by all listeners and shards (relaxed atomics,
//! touched per connection event, never per packet).

use std::sync::atomic::{AtomicU64, Ordering};

/// The QUIC drivers' counters.
#[derive(Debug, Default)]
pub struct QuicCounters {
    /// QUIC connections held now (handshakes in progress included).
    pub connections: AtomicU64,
    /// Connections whose MQTT stream opened (handshake done, handed to the broker).
    pub streams_opened: AtomicU64,
    /// Connection attempts refused at `max_connections_per_shard`.
    pub refused: AtomicU64,
    /// Handshakes that failed (refused by quinn-proto: a bad Initial, a TLS failure).
    pub handshake_failures: AtomicU64,
    /// Connections whose MQTT stream opened in 0-RTT (a resumed client's early data).
    pub zero_rtt_accepted: AtomicU64,
    /// Of those, connections where early data had to wait for the handshake (a packet that is
    /// not replay-safe: `quic/early.rs`).
    pub early_data_waited: AtomicU64,
    /// Peer address changes of open connections (migrations, NAT rebindings).
    pub migrations: AtomicU64,
    /// Packets declared lost, summed as each connection ends.
    pub lost_packets: AtomicU64,
    /// Packets sent, summed as each connection ends.
    pub sent_packets: AtomicU64,
}

impl QuicCounters {
    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn sub(counter: &AtomicU64, n: u64) {
        counter.fetch_sub(n, Ordering::Relaxed);
    }

    /// A counter's value now.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
