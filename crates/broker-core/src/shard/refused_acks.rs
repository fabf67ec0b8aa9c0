//! Refused acknowledgements (docs/cluster.md, "Guarantees"): a QoS 1/2 message the cluster did
//! not keep (JetStream did not acknowledge it within `cluster.ack_timeout_ms`, or it did not
//! fit in the queue to the cluster while NATS was up) is never acknowledged with Success. On
//! MQTT 5.0 the PUBACK / PUBREC carries 0x80 Unspecified error (not kept in time: the cause
//! may pass) or 0x97 Quota exceeded (the node's bound on messages waiting for NATS is full);
//! MQTT 3.1.1 has no negative acknowledgement, so the connection is closed without it and the
//! client sends the PUBLISH again when it reconnects. A refused QoS 2 message's packet id is
//! released, so a resend is taken as a new message.

use codec::{Packet, ReasonCode};
use ring_runtime::ConnId;

use super::{BrokerShard, Ctx, client_id_of};

impl BrokerShard {
    /// Refuses the acknowledgement `packet` (a PUBACK or PUBREC; any other is sent as it is)
    /// with `reason` on 5.0, by closing the connection on 3.1.1; counted.
    pub(super) fn refuse_cluster_ack(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        mut packet: Packet,
        reason: ReasonCode,
    ) {
        match &mut packet {
            Packet::PubAck(ack) => ack.reason_code = reason,
            Packet::PubRec(rec) => {
                rec.reason_code = reason;
                if let Some(client_id) = client_id_of(&self.conns, &self.sessions, conn) {
                    self.release_inbound_qos2(&client_id, rec.packet_id);
                }
            }
            _ => return self.wire().send_packet(ctx, conn, &packet),
        }
        if let Some(link) = &self.shared.links.cluster {
            link.count_refused_ack();
        }
        if self.conns.get(&conn).is_some_and(|c| c.protocol.is_v5()) {
            self.wire().send_packet(ctx, conn, &packet);
        } else {
            self.wire().close_connection(ctx, conn);
        }
    }
}
