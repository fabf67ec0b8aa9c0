//! Acknowledgements that wait for the cluster (docs/cluster.md, "Guarantees"): with
//! `[cluster]`, the PUBACK / PUBREC of a client's QoS 1/2 PUBLISH leaves once it is durable
//! where persistence says so (`durable.rs`, first: its batch is that of the PUBLISH's turn)
//! and the cluster thread has settled the message (`cluster/settled.rs`: kept by JetStream,
//! or sent on NATS core where nothing keeps it). While NATS is
//! down nothing waits: the message stays in the node's bounded buffer and the publisher is
//! acknowledged at once, as on a single node.
//!
//! The acknowledgements of a shard leave in order (one queue), so a connection's leave in the
//! order of its PUBLISHes. A connection with `limits.receive_maximum` of them waiting is
//! parked (its further packets wait, TCP pushes back) until some leave.

use codec::Packet;
use ring_runtime::{ConnId, ShardId};

use super::held_acks::HeldAck;
use super::parts::ClusterSide;
use super::{BrokerShard, Ctx};
use crate::shared_parts::Links;

impl BrokerShard {
    /// Sends the acknowledgement of a client's packet: first as persistence says
    /// (`durable.rs`), then once the cluster settled the message of the PUBLISH being handled
    /// (and behind any acknowledgement that waits for the cluster).
    pub(super) fn send_ack(&mut self, ctx: &mut Ctx, conn: ConnId, packet: Packet) {
        let waits_for = std::mem::take(&mut self.cluster_side.cluster_acks.current);
        self.send_ack_when_durable(ctx, conn, packet, waits_for);
    }

    /// Sends an acknowledgement (already durable where it must be) once the cluster settled
    /// message `waits_for`, in order behind the others that wait.
    pub(super) fn send_ack_when_settled(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        packet: Packet,
        waits_for: u64,
    ) {
        if self.cluster_side.cluster_acks.held.is_empty()
            && waits_for <= cluster_settled(&self.shared.links, self.id)
        {
            self.wire().send_packet(ctx, conn, &packet);
            return;
        }
        let acks = &mut self.cluster_side.cluster_acks;
        acks.held.push_back(HeldAck {
            waits_for,
            conn,
            packet,
        });
        let count = acks.held_per_conn.entry(conn).or_insert(0);
        *count += 1;
        if *count >= self.shared.config.limits.held_ack_limit()
            && let Some(connection) = self.conns.get_mut(&conn)
        {
            connection.park();
        }
    }

    /// Sends the acknowledgements whose messages the cluster settled (all while NATS is down).
    pub(super) fn release_cluster_acks(&mut self, ctx: &mut Ctx) {
        if self.cluster_side.cluster_acks.held.is_empty() {
            return;
        }
        let settled = cluster_settled(&self.shared.links, self.id);
        let limit = self.shared.config.limits.held_ack_limit();
        while self
            .cluster_side
            .cluster_acks
            .held
            .front()
            .is_some_and(|held| held.waits_for <= settled)
        {
            let Some(held) = self.cluster_side.cluster_acks.held.pop_front() else {
                break;
            };
            let per_conn = &mut self.cluster_side.cluster_acks.held_per_conn;
            let was_full = per_conn.get(&held.conn).is_some_and(|n| *n >= limit);
            if let Some(count) = per_conn.get_mut(&held.conn) {
                *count -= 1;
                if *count == 0 {
                    per_conn.remove(&held.conn);
                }
            }
            self.wire().send_packet(ctx, held.conn, &held.packet);
            if was_full {
                self.unpark_if_free(ctx, held.conn);
            }
        }
    }
}

impl ClusterSide {
    /// The number a QoS 1/2 message handed to the cluster now settles under (`None`: its
    /// acknowledgement does not wait: QoS 0, no cluster, or NATS down).
    pub(super) fn cluster_ack_number(&self, links: &Links, qos: codec::QoS) -> Option<u64> {
        let link = links.cluster.as_ref()?;
        if qos == codec::QoS::AtMostOnce || !link.connected() {
            return None;
        }
        Some(self.cluster_acks.last + 1)
    }
}

/// The highest number the cluster settled for this shard; everything while NATS is down.
fn cluster_settled(links: &Links, shard: ShardId) -> u64 {
    match &links.cluster {
        Some(link) if link.connected() => link.settled(shard),
        _ => u64::MAX,
    }
}
