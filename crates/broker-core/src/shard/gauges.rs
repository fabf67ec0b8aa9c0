//! [`Gauges`]: what the shard last published to `$SYS`; `sys.rs` updates and publishes them.

/// Gauges this shard keeps for `$SYS`.
#[derive(Debug, Default)]
pub(super) struct Gauges {
    /// Subscriptions of this shard's sessions.
    pub(super) subscriptions: usize,
    /// Clients connected to this shard.
    pub(super) connected_clients: usize,
}
