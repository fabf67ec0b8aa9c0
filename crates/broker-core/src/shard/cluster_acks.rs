//! Acknowledgements that wait for the cluster (docs/cluster.md, "Guarantees"): with
//! `[cluster]`, the PUBACK / PUBREC of a client's QoS 1/2 PUBLISH handed to the cluster
//! leaves once it is durable where persistence says so (`durable.rs`, first: its
//! batch is that of the PUBLISH's turn) and the cluster thread has settled the message
//! (`cluster/settled.rs`: kept by JetStream, or sent on NATS core where nothing keeps it). A
//! message the cluster gave up, or did not settle within `cluster.ack_timeout_ms`, or that did
//! not fit in its queue, is refused (`refused_acks.rs`). A PUBLISH handled while NATS is down
//! waits the same way (its message is kept once NATS is back, or refused at its deadline),
//! unless `cluster.ack_while_disconnected` is set: then it waits for nothing of its own, the
//! message stays in the node's bounded buffer and the publisher is acknowledged as on a single
//! node (behind the acknowledgements still held).
//!
//! The acknowledgements of a shard leave in order (one queue), so a connection's leave in the
//! order of its PUBLISHes. A connection with `limits.receive_maximum` of them waiting is
//! parked (its further packets wait, TCP pushes back) until some leave.

use std::time::Instant;

use codec::{Packet, ReasonCode};
use ring_runtime::{ConnId, ShardId};

use super::held_acks::{ClusterWait, HeldAck};
use super::parts::ClusterSide;
use super::{BrokerShard, Ctx};
use crate::shared_parts::Links;

impl BrokerShard {
    /// Sends the acknowledgement of a client's packet: first as persistence says
    /// (`durable.rs`), then once the cluster settled the message of the PUBLISH being handled
    /// (and behind any acknowledgement that waits for the cluster). Refused in its turn when
    /// that message did not fit in the queue to the cluster.
    pub(super) fn send_ack(&mut self, ctx: &mut Ctx, conn: ConnId, packet: Packet) {
        let number = std::mem::take(&mut self.cluster_side.cluster_acks.current);
        let waits_for = match std::mem::take(&mut self.cluster_side.cluster_acks.queue_full) {
            true => ClusterWait::QueueFull,
            false => ClusterWait::Settled(number),
        };
        self.send_ack_when_durable(ctx, conn, packet, waits_for);
    }

    /// Sends an acknowledgement (already durable where it must be) once `waits_for` is done,
    /// in order behind the others that wait.
    pub(super) fn send_ack_when_settled(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        packet: Packet,
        waits_for: ClusterWait,
    ) {
        if self.cluster_side.cluster_acks.held.is_empty()
            && waits_for.is_ready(cluster_settled(&self.shared.links, self.id))
        {
            self.send_settled_ack(ctx, conn, packet, waits_for);
            return;
        }
        let deadline = match (waits_for, &self.shared.links.cluster) {
            (ClusterWait::Settled(1..), Some(link)) => Some(Instant::now() + link.ack_timeout()),
            _ => None,
        };
        let acks = &mut self.cluster_side.cluster_acks;
        acks.held.push_back(HeldAck {
            waits_for,
            deadline,
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

    /// Sends the acknowledgements whose messages the cluster settled, refusing those it gave
    /// up and those that waited past their deadline.
    pub(super) fn release_cluster_acks(&mut self, ctx: &mut Ctx) {
        if self.cluster_side.cluster_acks.held.is_empty() {
            return;
        }
        let settled = cluster_settled(&self.shared.links, self.id);
        let now = Instant::now();
        let limit = self.shared.config.limits.held_ack_limit();
        while let Some(expired) = self
            .cluster_side
            .cluster_acks
            .held
            .front()
            .and_then(|held| {
                let expired = held.deadline.is_some_and(|deadline| deadline <= now);
                let ready = held.waits_for.is_ready(settled);
                (ready || expired).then_some(!ready)
            })
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
            if expired {
                let reason = ReasonCode::UnspecifiedError;
                self.refuse_cluster_ack(ctx, held.conn, held.packet, reason);
            } else {
                self.send_settled_ack(ctx, held.conn, held.packet, held.waits_for);
            }
            if was_full {
                self.unpark_if_free(ctx, held.conn);
            }
        }
    }

    /// Sends an acknowledgement whose wait is done; refused when its message did not fit in
    /// the queue to the cluster (0x97) or the cluster gave it up (0x80).
    fn send_settled_ack(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        packet: Packet,
        waits_for: ClusterWait,
    ) {
        let given_up = |number| {
            let link = self.shared.links.cluster.as_ref();
            link.is_some_and(|link| link.take_failed(self.id, number))
        };
        let refusal = match waits_for {
            ClusterWait::QueueFull => Some(ReasonCode::QuotaExceeded),
            ClusterWait::Settled(number @ 1..) if given_up(number) => {
                Some(ReasonCode::UnspecifiedError)
            }
            ClusterWait::Settled(_) => None,
        };
        match refusal {
            Some(reason) => self.refuse_cluster_ack(ctx, conn, packet, reason),
            None => self.wire().send_packet(ctx, conn, &packet),
        }
    }
}

impl ClusterSide {
    /// The number a QoS 1/2 message handed to the cluster now settles under (`None`: its
    /// acknowledgement does not wait: QoS 0, no cluster, or NATS down with
    /// `cluster.ack_while_disconnected`).
    pub(super) fn cluster_ack_number(&self, links: &Links, qos: codec::QoS) -> Option<u64> {
        let link = links.cluster.as_ref()?;
        if qos == codec::QoS::AtMostOnce || !link.acks_wait() {
            return None;
        }
        Some(self.cluster_acks.last + 1)
    }
}

/// The highest number the cluster settled for this shard (everything on a single node). While
/// NATS is down the numbers handed before still settle: kept once NATS is back, or given up.
fn cluster_settled(links: &Links, shard: ShardId) -> u64 {
    match &links.cluster {
        Some(link) => link.settled(shard),
        None => u64::MAX,
    }
}
