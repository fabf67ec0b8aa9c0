//! [`BridgeStats`]: one bridge's figures at one moment, and [`BridgeFigures`], where the shards
//! read them for `$SYS`.

/// One bridge's figures at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeStats {
    /// The bridge's configured name.
    pub name: String,
    /// Whether both its connections (remote and local) are up.
    pub connected: bool,
    /// Messages brought in from the remote broker and accepted by the local one.
    pub messages_in: u64,
    /// Messages sent out to the remote broker (QoS 1/2: acknowledged by it).
    pub messages_out: u64,
    /// Messages the bridge gave up on: no rule maps their topic, or the destination refused
    /// them with an error reason code.
    pub dropped: u64,
    /// Connection attempts after the first.
    pub reconnects: u64,
}

/// The running bridges' figures, in config order.
pub trait BridgeFigures: Send + Sync {
    /// Every running bridge's figures now.
    fn stats(&self) -> Vec<BridgeStats>;
}
