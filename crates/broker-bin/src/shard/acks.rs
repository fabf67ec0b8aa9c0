//! Acknowledgements: PUBACK, PUBREC, PUBREL and PUBCOMP. A completed outbound flow frees a slot
//! in the inflight window, which the session's queue refills at once.

use codec::{Packet, PacketId, PubComp, PubRec, PubRel, ReasonCode};
use ring_runtime::ConnId;
use tracing::debug;

use super::{BrokerShard, Ctx};

impl BrokerShard {
    /// PUBACK: a QoS 1 delivery is complete.
    pub(super) fn handle_puback(&mut self, ctx: &mut Ctx, conn: ConnId, id: PacketId) {
        let Some(client_id) = self.client_id_of(conn) else {
            return;
        };
        if let Some(session) = self.sessions.get_mut(&client_id)
            && let Err(error) = session.inflight.on_puback(id)
        {
            debug!(%error, client = client_id.as_str(), "PUBACK ignored");
        }
        self.drain_session(ctx, &client_id);
    }

    /// PUBREC: answer PUBREL (0x92 when the id is unknown); an error reason ends the flow.
    pub(super) fn handle_pubrec(&mut self, ctx: &mut Ctx, conn: ConnId, rec: PubRec) {
        let Some(client_id) = self.client_id_of(conn) else {
            return;
        };
        let Some(session) = self.sessions.get_mut(&client_id) else {
            return;
        };
        if rec.reason_code.is_error() {
            session.inflight.abandon(rec.packet_id);
            self.drain_session(ctx, &client_id);
            return;
        }
        let mut rel = PubRel::new(rec.packet_id);
        if session.inflight.on_pubrec(rec.packet_id).is_err() {
            rel.reason_code = ReasonCode::PacketIdentifierNotFound;
        }
        self.send_packet(ctx, conn, &Packet::PubRel(rel));
    }

    /// PUBREL: the client releases an inbound QoS 2 message; answer PUBCOMP.
    pub(super) fn handle_pubrel(&mut self, ctx: &mut Ctx, conn: ConnId, id: PacketId) {
        let Some(client_id) = self.client_id_of(conn) else {
            return;
        };
        let known = self
            .sessions
            .get_mut(&client_id)
            .is_some_and(|s| s.awaiting_release.release(id));
        let mut comp = PubComp::new(id);
        if !known {
            comp.reason_code = ReasonCode::PacketIdentifierNotFound;
        }
        self.send_packet(ctx, conn, &Packet::PubComp(comp));
    }

    /// PUBCOMP: a QoS 2 delivery is complete.
    pub(super) fn handle_pubcomp(&mut self, ctx: &mut Ctx, conn: ConnId, id: PacketId) {
        let Some(client_id) = self.client_id_of(conn) else {
            return;
        };
        if let Some(session) = self.sessions.get_mut(&client_id)
            && let Err(error) = session.inflight.on_pubcomp(id)
        {
            debug!(%error, client = client_id.as_str(), "PUBCOMP ignored");
        }
        self.drain_session(ctx, &client_id);
    }
}
