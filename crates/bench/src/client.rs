//! One simulated MQTT client's state.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use bytes::BytesMut;
use ring_runtime::ConnId;

use crate::plan::ClientPlan;
use crate::stats::OrderTracker;

/// Where a client is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not connected yet.
    Pending,
    /// TCP connect in progress.
    Connecting,
    /// CONNECT sent.
    AwaitConnAck,
    /// SUBSCRIBE sent.
    AwaitSubAck,
    /// Connected (and subscribed): doing its role.
    Ready,
    /// Gone.
    Closed,
}

/// One client.
#[derive(Debug)]
pub struct Client {
    pub plan: ClientPlan,
    pub phase: Phase,
    pub conn: Option<ConnId>,
    pub carry: BytesMut,
    next_packet_id: u16,
    /// QoS 1/2 messages sent and not yet completed.
    pub inflight: u16,
    /// Messages published.
    pub sent: u64,
    /// Messages received.
    pub received: u64,
    /// Whether this publisher reached its limit and saw every acknowledgement.
    pub done: bool,
    /// When publishing starts (after the warm-up).
    pub publish_from: Option<Instant>,
    /// What arrived: its order per publisher, and QoS 2 ids awaiting PUBREL.
    pub inbound: Inbound,
    /// When this client last sent anything (for PINGREQ).
    pub last_send: Instant,
}

/// What a client received: per publisher index the order of what arrived, and inbound QoS 2 ids
/// awaiting PUBREL.
#[derive(Debug, Default)]
pub struct Inbound {
    pub order: HashMap<u32, OrderTracker>,
    pub awaiting_rel: HashSet<u16>,
}

impl Client {
    /// A client that has not connected.
    pub fn new(plan: ClientPlan, now: Instant) -> Self {
        Self {
            plan,
            phase: Phase::Pending,
            conn: None,
            carry: BytesMut::new(),
            next_packet_id: 0,
            inflight: 0,
            sent: 0,
            received: 0,
            done: false,
            publish_from: None,
            inbound: Inbound::default(),
            last_send: now,
        }
    }

    /// The next packet id (1..=65535, wrapping). The inflight window is far below 65,535, so an
    /// id is never reused while in flight.
    pub fn packet_id(&mut self) -> codec::PacketId {
        self.next_packet_id = self.next_packet_id.wrapping_add(1).max(1);
        codec::PacketId::new(self.next_packet_id).expect("invariant: max(1) is non-zero")
    }
}
