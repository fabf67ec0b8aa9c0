//! [`ClusterAcks`]: QoS 1/2 acknowledgements held until the cluster link has sent or kept their message; `cluster_acks.rs` holds and releases them.

use super::FastMap;
use codec::Packet;
use ring_runtime::ConnId;
use std::collections::VecDeque;
use std::time::Instant;

/// This shard's acknowledgements waiting for the cluster.
#[derive(Debug, Default)]
pub(super) struct ClusterAcks {
    /// The number of the last message handed to the cluster with a waiting acknowledgement.
    pub(super) last: u64,
    /// The number the PUBLISH being handled waits for (0: none), taken by its acknowledgement.
    pub(super) current: u64,
    /// The PUBLISH being handled did not fit in the queue to the cluster while NATS was up:
    /// its acknowledgement is refused (taken by it).
    pub(super) queue_full: bool,
    pub(super) held: VecDeque<HeldAck>,
    pub(super) held_per_conn: FastMap<ConnId, u32>,
}

#[derive(Debug)]
pub(super) struct HeldAck {
    /// Leaves once this is done, behind the others.
    pub(super) waits_for: ClusterWait,
    /// Refused once this passes before its number settled (`cluster.ack_timeout_ms`).
    pub(super) deadline: Option<Instant>,
    pub(super) conn: ConnId,
    pub(super) packet: Packet,
}

/// What an acknowledgement waits for in the cluster, in its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClusterWait {
    /// The cluster settling this number (0: nothing of its own).
    Settled(u64),
    /// Nothing: its message did not fit in the queue to the cluster, it is refused (0x97).
    QueueFull,
}

impl ClusterWait {
    /// Whether it may leave once the cluster settled `settled`.
    pub(super) fn is_ready(self, settled: u64) -> bool {
        match self {
            Self::Settled(number) => number <= settled,
            Self::QueueFull => true,
        }
    }
}

impl ClusterAcks {
    /// Acknowledgements `conn` has waiting.
    pub(super) fn held(&self, conn: ConnId) -> u32 {
        self.held_per_conn.get(&conn).copied().unwrap_or(0)
    }

    /// A new PUBLISH is being handled: nothing of an earlier one is pending.
    pub(super) fn begin_cluster_ack(&mut self) {
        self.current = 0;
        self.queue_full = false;
    }

    /// The message numbered `number` was queued for the cluster: the acknowledgement of the
    /// PUBLISH being handled waits for it.
    pub(super) fn cluster_ack_handed(&mut self, number: u64) {
        self.last = number;
        self.current = number;
    }
}
