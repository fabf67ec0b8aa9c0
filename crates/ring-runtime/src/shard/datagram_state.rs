//! The shard's datagram state (`datagrams.rs` runs it): the endpoints, what their drivers
//! asked of the handler, and the scratch space of a turn.

use crate::backend::InboundDatagram;
use crate::datagram::{DriverEvent, Endpoint};

/// The shard's datagram state.
#[derive(Default)]
pub(super) struct Datagrams {
    pub(super) endpoints: Vec<Endpoint>,
    /// What the drivers asked of the handler, not yet done.
    pub(super) events: Vec<DriverEvent>,
    /// Shards this one forwarded datagrams to since it last woke them.
    pub(super) forwarded_to: Vec<bool>,
    /// Scratch: received datagrams, a virtual connection's frames.
    pub(super) inbound: Vec<InboundDatagram>,
    pub(super) frames: Vec<bytes::Bytes>,
    /// Forwarded datagrams taken per turn (`RuntimeConfig::datagram_forward_queue`).
    pub(super) forward_budget: usize,
}

impl Datagrams {
    pub(super) fn new(endpoints: Vec<Endpoint>, shards: usize, forward_budget: usize) -> Self {
        Self {
            endpoints,
            forwarded_to: vec![false; shards],
            forward_budget,
            ..Self::default()
        }
    }

    /// Whether work waits that the next wait must not block on.
    pub(super) fn has_work(&self) -> bool {
        !self.events.is_empty()
    }
}
