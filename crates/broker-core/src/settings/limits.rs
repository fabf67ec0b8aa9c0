//! `[connection]` and `[limits]`: timeouts and the sizes a client may use.

use std::time::Duration;

/// `[connection]`
#[derive(Debug, Clone)]
pub struct ConnectionSettings {
    pub max_connections: u32,
    pub connect_timeout: Duration,
    /// `None` means no maximum.
    pub max_keep_alive: Option<u16>,
    /// `None` means clients may ask for no keep-alive.
    pub default_keep_alive: Option<u16>,
    pub max_client_id_len: u16,
}

impl ConnectionSettings {
    /// The keep-alive in force for `connect`: the client's, raised from 0 to the default and
    /// lowered to the maximum (5.0 only: a 3.x client cannot be told).
    pub fn keep_alive_for(&self, connect: &codec::Connect) -> u16 {
        let mut keep_alive = connect.keep_alive;
        if connect.protocol.is_v5() {
            if keep_alive == 0 {
                keep_alive = self.default_keep_alive.unwrap_or(0);
            }
            if let Some(max) = self.max_keep_alive {
                keep_alive = keep_alive.min(max);
            }
        }
        keep_alive
    }
}

/// `[limits]`
#[derive(Debug, Clone)]
pub struct LimitSettings {
    pub max_packet_size: u32,
    pub receive_maximum: u16,
    pub max_inflight_outbound: u16,
    pub topic_alias_maximum: u16,
    pub outbound_topic_alias_maximum: u16,
    pub max_topic_length: u16,
    pub max_topic_levels: u16,
    pub max_subscriptions_per_client: u32,
    /// Largest CONNECT accepted, checked from its fixed header.
    pub max_connect_size: u32,
    /// Most bytes held in partial frames over all connections.
    pub max_partial_frame_bytes: u64,
    /// Bytes of queued messages and partial frames freed after which every shard hands its free
    /// allocator memory back to the OS (0: never).
    pub return_memory_after_bytes: u64,
    /// How long freed allocator pages are kept for reuse before the allocator hands them back
    /// to the OS by itself (0: at once).
    pub free_memory_hold: Duration,
}

impl LimitSettings {
    /// Most acknowledgements one connection may have held before it is parked: its receive
    /// maximum, at least 1.
    pub fn held_ack_limit(&self) -> u32 {
        u32::from(self.receive_maximum).max(1)
    }
}
