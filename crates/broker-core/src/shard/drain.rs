//! A session's queue going out: drained into the inflight window and onto the wire while the
//! window has room and the connection's send queue is under its bounds (`queues.outbound_bytes`,
//! `queues.max_total_outbound_bytes`), stored copies' sends written first, re-sends after a
//! reconnect, and the backlog of connections that were over their bound.

use codec::{MqttStr, Packet, PacketId, PubRel, QoS};
use ring_runtime::ConnId;
use router::SubscriberId;

use super::send::NotSent;
use super::{BrokerShard, Ctx};
use crate::message::Outgoing;
use crate::session::SessionAt;
use session_store::storage::SessionWrite;

impl BrokerShard {
    /// Moves queued messages into the inflight window and onto the wire while the window has
    /// room and the connection's send queue is under its bound; then, for a queue that spilled
    /// to disk, asks for more of it once the in-memory part runs low.
    pub(super) fn drain_session(&mut self, ctx: &mut Ctx, client_id: &MqttStr) {
        if let Some(subscriber) = self.sessions.get(client_id).map(|s| s.subscriber) {
            self.drain_subscriber(ctx, subscriber);
        }
    }

    /// [`Self::drain_session`] for the session with subscriber key `subscriber`.
    pub(super) fn drain_subscriber(&mut self, ctx: &mut Ctx, subscriber: SubscriberId) {
        if let Some(at) = self.sessions.locate(subscriber) {
            self.drain_at(ctx, at);
        }
    }

    /// [`Self::drain_session`] for the session found at `at`.
    pub(super) fn drain_at(&mut self, ctx: &mut Ctx, at: SessionAt) {
        let Some(session) = self.sessions.at_mut(at) else {
            return;
        };
        // Sending never spills a queue: whether this one did is known now.
        let spilled = session.spilled().is_some();
        if let Some(conn) = session.conn {
            // Re-sends a resumed session still owes come first (none, and nothing cloned,
            // unless the session resumed with more in flight than its new Receive Maximum).
            if session.inflight.owes_resends() {
                let resends = session.inflight.take_resends();
                let client_id = session.client_id.clone();
                self.resend(ctx, &client_id, conn, resends);
            }
            self.send_from_queue(ctx, at, conn);
        }
        if spilled {
            let limit = self.shared.config.persistence.memory_queue_messages as usize;
            let (sessions, subscriber) = (&mut self.sessions, at.subscriber());
            self.durable
                .refill_from_disk_if_low(sessions, self.id, limit, subscriber);
        }
    }

    /// Sends queued copies while the window has room and `conn`'s send queue is under its
    /// bound (over it, the connection waits in the backlog).
    pub(super) fn send_from_queue(&mut self, ctx: &mut Ctx, at: SessionAt, conn: ConnId) {
        loop {
            if !self
                .delivery
                .send_queue_admits(&self.shared.limits.outbound, ctx, conn)
            {
                self.delivery.routes.backlog.insert(conn);
                self.timers
                    .arm_backlog_retry(ctx, self.shared.config.queues.backlog_retry);
                return;
            }
            let Some(session) = self.sessions.at_mut(at) else {
                return;
            };
            if !session.inflight.has_room() {
                return;
            }
            let Some(outgoing) = session.queue.pop() else {
                return;
            };
            self.send_next(ctx, at, conn, outgoing);
        }
    }

    /// Sends one queued copy: QoS 0 directly, QoS 1/2 under a new packet id (a stored copy's
    /// send is written first, and a stored QoS 2 copy's waits for the disk).
    pub(super) fn send_next(
        &mut self,
        ctx: &mut Ctx,
        at: SessionAt,
        conn: ConnId,
        outgoing: Outgoing,
    ) {
        if outgoing.qos == QoS::AtMostOnce {
            self.send_qos0(ctx, conn, outgoing.view());
            return;
        }
        let Some(session) = self.sessions.at_mut(at) else {
            return;
        };
        if outgoing.seq == 0 {
            let packet_id = session.inflight.next_packet_id();
            return self.send_then_admit(ctx, conn, at, packet_id, outgoing);
        }
        let copy = outgoing.clone();
        let Ok(packet_id) = session.inflight.admit(outgoing.qos, outgoing) else {
            return;
        };
        let client_id = session.client_id.clone();
        self.durable.record(SessionWrite::InflightSent {
            client_id: client_id.clone(),
            seq: copy.seq,
            packet_id,
        });
        self.send_admitted_stored(ctx, &client_id, conn, copy, packet_id);
    }

    /// The first send of a stored copy admitted under `packet_id`, its send recorded: held for
    /// the disk (a QoS 2 copy while acknowledgements wait) or sent now.
    pub(super) fn send_admitted_stored(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        conn: ConnId,
        copy: Outgoing,
        packet_id: PacketId,
    ) {
        if self.durable.publish_must_wait(&copy) {
            self.durable.hold_publish(conn, client_id, copy, packet_id);
            return;
        }
        match self.send_publish(ctx, conn, copy.view(), Some(packet_id), false) {
            Ok(()) => {
                // A full window waits on the client's acknowledgements: send it now.
                if self
                    .sessions
                    .get(client_id)
                    .is_some_and(|s| !s.inflight.has_room())
                {
                    ctx.expedite(conn);
                }
            }
            Err(NotSent::Closed) => {}
            Err(not_sent) => self.durable.first_send_failed(
                &mut self.sessions,
                &self.figures,
                client_id,
                packet_id,
                not_sent,
            ),
        }
    }

    /// A session got a connection: resend what is in flight (DUP PUBLISH or PUBREL), in order
    /// and within the client's Receive Maximum (the rest when acknowledgements make room), then
    /// send what was queued.
    pub(super) fn resume_session(&mut self, ctx: &mut Ctx, client_id: &MqttStr) {
        if let Some(session) = self.sessions.get_mut(client_id) {
            session.inflight.mark_all_unsent();
        }
        self.drain_session(ctx, client_id);
    }

    /// Sends `resends` again (a DUP PUBLISH, or the PUBREL owed): entries of the inflight window
    /// it now has room for.
    pub(super) fn resend(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        conn: ConnId,
        resends: Vec<(codec::PacketId, Option<Outgoing>)>,
    ) {
        for (packet_id, outgoing) in resends {
            match outgoing {
                Some(outgoing) => {
                    let sent = self.send_publish(ctx, conn, outgoing.view(), Some(packet_id), true);
                    if let Err(not_sent) = sent
                        && self.sessions.get(client_id).is_some()
                    {
                        self.durable
                            .abandon_inflight(&mut self.sessions, client_id, packet_id);
                        self.figures.count_dropped(not_sent.drop_reason(), 1);
                    }
                }
                None => self
                    .wire()
                    .send_packet(ctx, conn, &Packet::PubRel(PubRel::new(packet_id))),
            }
        }
    }

    /// Retries connections whose send queue was over its bound, or whose retained delivery
    /// spent its turn's share.
    pub(super) fn drain_backlog(&mut self, ctx: &mut Ctx) {
        if self.delivery.routes.backlog.is_empty() {
            return;
        }
        let waiting: Vec<ConnId> = self.delivery.routes.backlog.drain().collect();
        for conn in waiting {
            if let Some(subscriber) = self.conns.get(&conn).and_then(|c| c.session()) {
                self.drain_subscriber(ctx, subscriber);
            }
            // Retained copies owed go after the session's own queue.
            self.advance_retained(ctx, conn);
        }
    }
}
