//! The shard's side of persistence (`crate::store`): the writes of this turn, the batch handed
//! to the store thread at turn end, and what waits for it to be durable.
//!
//! What waits (`batch` sync only; `interval` and `none` wait for nothing):
//! - the PUBACK / PUBREC of a QoS 1/2 PUBLISH whose turn wrote something or routed QoS 1/2
//!   copies to other shards: it leaves once this shard's batch of that turn is durable and
//!   every shard that received copies confirmed, through its own durable batch, that it
//!   enqueued them;
//! - the first send of a stored QoS 2 copy to a subscriber, and the PUBREL of a stored flow: a
//!   restart must find them in flight under the packet id the subscriber saw, or it would
//!   deliver again (QoS 1 copies go at once: see `publish_must_wait`).
//!
//! An acknowledgement that need not wait still waits behind one that does (a connection's
//! acknowledgements leave in order). Held items leave in ticket order.

use codec::{MqttStr, Packet, PacketId};
use ring_runtime::ConnId;
use session_store::storage::SessionWrite;

use super::durability::Durability;
use super::durability::HeldSend;
use super::send::NotSent;
use super::{BrokerShard, Ctx};
use crate::message::Outgoing;
use crate::session::Sessions;

impl BrokerShard {
    /// Sends an acknowledgement of a client's packet once this turn's batch is durable when it
    /// must wait (see the module docs), then as `waits_for` says (`cluster_acks.rs`).
    pub(super) fn send_ack_when_durable(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        packet: Packet,
        waits_for: super::held_acks::ClusterWait,
    ) {
        if !self.durable.ack_must_wait() {
            self.send_ack_when_settled(ctx, conn, packet, waits_for);
            return;
        }
        let send = HeldSend::Ack { packet, waits_for };
        let held = self.durable.hold(conn, send, true);
        if held >= self.shared.config.limits.held_ack_limit()
            && let Some(connection) = self.conns.get_mut(&conn)
        {
            connection.park();
        }
    }

    /// Sends every held item whose batch is durable (and confirmed by the shards it needs).
    pub(super) fn release_durable(&mut self, ctx: &mut Ctx) {
        if self.durable.held.is_empty() {
            return;
        }
        let Some(store) = self
            .shared
            .persistence
            .store
            .as_ref()
            .map(std::sync::Arc::clone)
        else {
            return;
        };
        let durable = store.durable(self.id);
        let me = self.id;
        while let Some(held) = self
            .durable
            .pop_ready(durable, |shard| store.confirmed(me, shard))
        {
            if held.counted
                && self
                    .durable
                    .released_ack(held.conn, self.shared.config.limits.held_ack_limit())
            {
                self.unpark_if_free(ctx, held.conn);
            }
            match held.send {
                HeldSend::Packet(packet) => self.wire().send_packet(ctx, held.conn, &packet),
                HeldSend::Ack { packet, waits_for } => {
                    self.send_ack_when_settled(ctx, held.conn, packet, waits_for);
                }
                HeldSend::Publish {
                    client_id,
                    outgoing,
                    packet_id,
                } => self.send_held_publish(ctx, held.conn, &client_id, outgoing, packet_id),
            }
        }
    }

    fn send_held_publish(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        client_id: &MqttStr,
        outgoing: Outgoing,
        packet_id: PacketId,
    ) {
        // A connection that went away meanwhile finds the copy in flight when it resumes.
        let still_attached = self
            .sessions
            .get(client_id)
            .is_some_and(|s| s.conn == Some(conn));
        if !still_attached {
            return;
        }
        match self.send_publish(ctx, conn, outgoing.view(), Some(packet_id), false) {
            Ok(()) | Err(NotSent::Closed) => {}
            Err(NotSent::NotAuthorized) => {
                self.durable
                    .abandon_inflight(&mut self.sessions, client_id, packet_id)
            }
            Err(not_sent @ (NotSent::Expired | NotSent::TooLarge)) => {
                self.durable
                    .abandon_inflight(&mut self.sessions, client_id, packet_id);
                self.figures.count_dropped(not_sent.drop_reason(), 1);
            }
        }
    }
}

impl Durability {
    /// A PUBREL of a stored flow: held until its release is durable when acknowledgements
    /// wait for the disk, else given back to be sent now.
    pub(super) fn hold_pubrel(&mut self, conn: ConnId, packet: Packet) -> Option<Packet> {
        if !self.acks_wait() {
            return Some(packet);
        }
        self.hold(conn, HeldSend::Packet(packet), false);
        None
    }

    /// Ends an outbound flow without an acknowledgement (expired, too large, refused).
    pub(super) fn abandon_inflight(
        &mut self,
        sessions: &mut Sessions,
        client_id: &MqttStr,
        packet_id: PacketId,
    ) {
        let Some(session) = sessions.get_mut(client_id) else {
            return;
        };
        session.inflight.abandon(packet_id);
        self.record_if(session.expiry, || SessionWrite::InflightAcked {
            client_id: client_id.clone(),
            packet_id,
        });
    }
}
