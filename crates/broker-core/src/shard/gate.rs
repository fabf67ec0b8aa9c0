//! Acknowledgements that wait for replication: a SUBACK (and the retained messages after it) or
//! an UNSUBACK leaves only once every shard has applied the subscription changes it
//! acknowledges, so any PUBLISH the broker receives after the client saw it is matched against
//! the new state. Each shard that applies a change for a session held elsewhere wakes the holder
//! with `ShardMsg::Applied`.
//!
//! With `[persistence]` (acknowledgements waiting for the disk), a SUBACK or UNSUBACK also
//! waits for the batch holding its subscription writes to be durable: a client that saw it
//! finds the subscription after a crash.
//!
//! The connection's own later packets wait too (it is parked: what it sends meanwhile stays in
//! its carry), so every packet of a connection takes effect in the order it was sent: a PUBLISH
//! pipelined behind a SUBSCRIBE is matched with that subscription in place. A connection has
//! at most one acknowledgement waiting.

use codec::Packet;
use ring_runtime::ConnId;
use router::ChangeSeq;

use super::ack_gate::{PendingAck, RetainedDue};
use super::changes::applied_everywhere;
use super::{BrokerShard, Ctx};

impl BrokerShard {
    /// Sends `packet`, if any (then the retained messages due), once every shard has applied
    /// `last_change`, at once without a change of its own. A waiting acknowledgement parks its
    /// connection, so no later packet of it (and no later acknowledgement) is handled before.
    pub(super) fn ack_when_applied(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        last_change: Option<ChangeSeq>,
        packet: Option<Packet>,
        retained_due: RetainedDue,
    ) {
        let ticket = self.durable.ticket_of_this_turns_writes();
        if last_change.is_none() && ticket.is_none() {
            self.finish_ack(ctx, conn, packet.as_ref(), retained_due);
            return;
        }
        let pending = PendingAck {
            conn,
            after: last_change,
            ticket,
            packet,
            retained_due,
        };
        self.replication.gate.pending.push(pending);
        if let Some(connection) = self.conns.get_mut(&conn) {
            connection.park();
        }
    }

    /// Sends the acknowledgements whose changes every shard has applied (and whose writes
    /// are durable, when they must be).
    pub(super) fn release_acks(&mut self, ctx: &mut Ctx) {
        if self.replication.gate.pending.is_empty() {
            return;
        }
        let applied = applied_everywhere(&self.shared.order);
        let durable = self
            .shared
            .persistence
            .store
            .as_ref()
            .map_or(0, |s| s.durable(self.id));
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.replication.gate.pending)
            .into_iter()
            .partition(|p| {
                p.after.is_none_or(|after| after < applied)
                    && p.ticket.is_none_or(|ticket| ticket <= durable)
            });
        self.replication.gate.pending = waiting;
        for p in ready {
            self.finish_ack(ctx, p.conn, p.packet.as_ref(), p.retained_due);
            // The acknowledgement is out: handle what the client sent behind the packet.
            self.unpark_if_free(ctx, p.conn);
        }
    }

    /// Lets a parked connection read again unless it still waits for a SUBACK/UNSUBACK, has
    /// its bound of acknowledgements held for the disk (`durable.rs`) or waits for its publish
    /// rate (`throttle.rs`).
    pub(super) fn unpark_if_free(&mut self, ctx: &mut Ctx, conn: ConnId) {
        let awaiting_ack = self.replication.gate.pending.iter().any(|p| p.conn == conn)
            || self.auth.topic_waits.waits_for_topics(conn)
            || self.replication.order_waits.holds(conn);
        let limit = self.shared.config.limits.held_ack_limit();
        let held_full = self.durable.held_acks(conn) >= limit
            || self.cluster_side.cluster_acks.held(conn) >= limit;
        if awaiting_ack || held_full || self.door.throttle.is_throttled(conn) {
            return;
        }
        if let Some(connection) = self.conns.get_mut(&conn) {
            connection.unpark();
        }
        self.resume_reading(ctx, conn);
    }

    /// Sends the acknowledgement, then starts the retained deliveries it made due
    /// (`retained_delivery.rs`).
    fn finish_ack(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        packet: Option<&Packet>,
        retained_due: RetainedDue,
    ) {
        if let Some(packet) = packet {
            self.wire().send_packet(ctx, conn, packet);
        }
        self.start_retained(ctx, conn, retained_due);
    }
}
