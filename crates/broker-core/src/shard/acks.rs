//! Acknowledgements: PUBACK, PUBREC, PUBREL and PUBCOMP. A completed outbound flow frees a slot
//! in the inflight window, which the session's queue refills once half the window is free.

use codec::{MqttStr, Packet, PacketId, PacketType, PubComp, PubRec, PubRel, ReasonCode, ShortAck};
use ring_runtime::ConnId;
use session_store::storage::SessionWrite;
use session_store::{AckError, InflightWindow};
use tracing::debug;

use super::{BrokerShard, Ctx, Fault, client_id_of};
use crate::message::Outgoing;

impl BrokerShard {
    /// An acknowledgement holding only its packet id (every 3.1.1 one, and a 5.0 one with
    /// Success): handled as `handle_packet` would, without the packet (acknowledgements are
    /// never held for topic checks).
    pub(super) fn handle_short_ack(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        ack: ShortAck,
    ) -> Result<(), Fault> {
        if !self.conns.get(&conn).is_some_and(|c| c.is_connected()) {
            let packet = ack.packet;
            return Err(Fault::protocol(format!(
                "{packet} before CONNECT completed"
            )));
        }
        let id = ack.packet_id;
        match ack.packet {
            PacketType::PubAck => self.handle_puback(ctx, conn, id),
            PacketType::PubRec => self.handle_pubrec(ctx, conn, PubRec::new(id)),
            PacketType::PubRel => self.handle_pubrel(ctx, conn, id),
            _ => self.handle_pubcomp(ctx, conn, id),
        }
        Ok(())
    }

    /// PUBACK: a QoS 1 delivery is complete.
    pub(super) fn handle_puback(&mut self, ctx: &mut Ctx, conn: ConnId, id: PacketId) {
        self.complete_outbound(ctx, conn, id, "PUBACK", |window| {
            let copy = window.on_puback(id)?;
            Ok((copy.message.received_ns, copy.message.key))
        });
    }

    /// A PUBACK or PUBCOMP: `complete` ends the flow in the session's window (giving the
    /// turn its message was received in, for the slow-subscriber book, and its key; 0 and 0 for
    /// PUBCOMP, whose PUBREC was measured), the store and the mirror forget it, and the queue
    /// refills the window once half of it is free. A session with nothing queued or owed (the
    /// usual case: its copies went out at once) is not drained, and its client id is not even
    /// cloned unless it is stored.
    /// Whether the flow ended.
    fn complete_outbound(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        id: PacketId,
        packet: &'static str,
        complete: impl FnOnce(&mut InflightWindow<Outgoing>) -> Result<(u64, u64), AckError>,
    ) -> bool {
        let Some(subscriber) = self.conns.get(&conn).and_then(|c| c.session()) else {
            return false;
        };
        let Some(at) = self.sessions.locate(subscriber) else {
            return false;
        };
        let Some(session) = self.sessions.at_mut(at) else {
            return false;
        };
        let completed = match complete(&mut session.inflight) {
            Ok((received_ns, key)) => {
                let client_id = session.client_id.as_str();
                self.figures.note_acknowledged(ctx, client_id, received_ns);
                record_acked(&mut self.durable, session.expiry, &session.client_id, id);
                (self.cluster_side).mirror_acknowledged(&self.shared.links, ctx, session, key);
                true
            }
            Err(error) => {
                debug!(%error, client = session.client_id.as_str(), packet, "ignored");
                false
            }
        };
        if super::deliver::needs_drain(session) {
            self.drain_at(ctx, at);
        }
        // A freed slot also lets a retained delivery waiting for the window on.
        self.advance_retained(ctx, conn);
        completed
    }

    /// PUBREC: answer PUBREL (0x92 when the id is unknown); an error reason ends the flow.
    pub(super) fn handle_pubrec(&mut self, ctx: &mut Ctx, conn: ConnId, rec: PubRec) {
        let Some(client_id) = client_id_of(&self.conns, &self.sessions, conn) else {
            return;
        };
        let Some(session) = self.sessions.get_mut(&client_id) else {
            return;
        };
        let expiry = session.expiry;
        if rec.reason_code.is_error() {
            self.durable
                .abandon_inflight(&mut self.sessions, &client_id, rec.packet_id);
            self.drain_session(ctx, &client_id);
            return;
        }
        let mut rel = PubRel::new(rec.packet_id);
        match session.inflight.on_pubrec(rec.packet_id) {
            Ok(Some(copy)) => {
                let received_ns = copy.message.received_ns;
                self.figures
                    .note_acknowledged(ctx, client_id.as_str(), received_ns);
                let key = copy.message.key;
                (self.cluster_side).mirror_acknowledged(&self.shared.links, ctx, session, key);
                self.journal_released(ctx, conn, rec.packet_id);
                if self.durable.stores(expiry) {
                    self.durable.record(SessionWrite::InflightReleased {
                        client_id: client_id.clone(),
                        packet_id: rec.packet_id,
                    });
                    if let Some(pubrel) = self.durable.hold_pubrel(conn, Packet::PubRel(rel)) {
                        self.wire().send_packet(ctx, conn, &pubrel);
                    }
                    return;
                }
            }
            Ok(None) => {}
            Err(_) => rel.reason_code = ReasonCode::PacketIdentifierNotFound,
        }
        self.wire().send_packet(ctx, conn, &Packet::PubRel(rel));
    }

    /// PUBREL: the client releases an inbound QoS 2 message; answer PUBCOMP.
    pub(super) fn handle_pubrel(&mut self, ctx: &mut Ctx, conn: ConnId, id: PacketId) {
        let Some(client_id) = client_id_of(&self.conns, &self.sessions, conn) else {
            return;
        };
        let mut comp = PubComp::new(id);
        if !self.release_inbound_qos2(&client_id, id) {
            comp.reason_code = ReasonCode::PacketIdentifierNotFound;
        }
        self.send_ack(ctx, conn, Packet::PubComp(comp));
    }

    /// Releases the inbound QoS 2 packet id `id` of `client_id`'s session (a PUBREL, or a
    /// PUBREC that refused the message) and records it; whether the id was awaiting release.
    pub(super) fn release_inbound_qos2(&mut self, client_id: &MqttStr, id: PacketId) -> bool {
        let released = (self.sessions.get_mut(client_id))
            .and_then(|s| s.release_awaiting(id).then_some(s.expiry));
        let Some(expiry) = released else {
            return false;
        };
        self.durable
            .record_if(expiry, || SessionWrite::Qos2Released {
                client_id: client_id.clone(),
                packet_id: id,
            });
        true
    }

    /// PUBCOMP: a QoS 2 delivery is complete.
    pub(super) fn handle_pubcomp(&mut self, ctx: &mut Ctx, conn: ConnId, id: PacketId) {
        let completed = self.complete_outbound(ctx, conn, id, "PUBCOMP", |window| {
            window.on_pubcomp(id).map(|()| (0, 0))
        });
        if completed {
            self.journal_completed(ctx, conn, id);
        }
    }
}

/// An outbound flow completed: its packet id is free in the store too.
fn record_acked(
    durable: &mut super::durability::Durability,
    expiry: session_store::SessionExpiry,
    client_id: &MqttStr,
    packet_id: PacketId,
) {
    durable.record_if(expiry, || SessionWrite::InflightAcked {
        client_id: client_id.clone(),
        packet_id,
    });
}
