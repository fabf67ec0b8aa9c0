//! Outbound delivery to the sessions this shard owns: QoS 0 straight to the socket (dropped
//! beyond the connection's byte bound), QoS 1/2 through the inflight window and the session's
//! bounded queue (the slow-consumer policy applies at its bound).

use codec::{MqttStr, PacketId, QoS, ReasonCode};
use ring_runtime::ConnId;
use router::SubscriberId;
use session_store::Pushed;
use tracing::debug;

use super::durability::Durability;
use super::parts::{Delivery, Figures, Wire};
use super::replica::ReplicaState;
use super::send::NotSent;
use super::{BrokerShard, Ctx};
use crate::message::{CopyBatch, CopyView, Expiry, Outgoing, Recipient};
use crate::metrics::DropReason;
use crate::session::Session;
use crate::session::SessionAt;
use crate::session::Sessions;
use crate::store::stored_message;
use ring_runtime::ShardId;
use session_store::storage::SessionWrite;

impl BrokerShard {
    /// A batch from another shard. A QoS 0 copy for a session here is framed from the batch's
    /// handle on its message; any other copy takes a handle of its own.
    pub(super) fn deliver_batch(
        &mut self,
        ctx: &mut Ctx,
        origin: ring_runtime::ShardId,
        forwarded: bool,
        batch: CopyBatch,
    ) {
        let (messages, copies) = batch.into_parts();
        for batched in copies {
            if batched.copy.qos == QoS::AtMostOnce {
                let view = batched.copy.view(batched.message_in(&messages));
                if self.deliver_qos0_here(ctx, batched.subscriber, view) {
                    continue;
                }
            }
            let recipient = batched.into_recipient(&messages);
            self.deliver_from(ctx, origin, forwarded, recipient);
        }
    }

    /// One copy for one session of this shard (forwarded if the session has moved).
    pub(super) fn deliver(&mut self, ctx: &mut Ctx, recipient: Recipient) {
        let located = self.sessions.locate(recipient.subscriber);
        let Some((at, conn)) = located.and_then(|at| Some((at, self.sessions.at(at)?.conn))) else {
            self.delivery
                .forward(&self.replication.replica, &self.figures, self.id, recipient);
            return;
        };
        if recipient.outgoing.qos == QoS::AtMostOnce {
            self.deliver_qos0(ctx, conn, recipient.outgoing.view());
            return;
        }
        if recipient.outgoing.message.expiry(ctx.now()) == Expiry::Expired {
            self.figures.count_dropped(DropReason::Expired, 1);
            return;
        }
        let Err(outgoing) = self.send_at_once(ctx, at, recipient.outgoing) else {
            return;
        };
        self.enqueue(ctx, at, outgoing);
    }

    /// A QoS 1/2 copy for a connected session with nothing queued or owed ahead of it and room
    /// in its window: admitted and sent at once, never queued (no queue allocation, no charge
    /// against the queues' shared byte budget; no client-id handle unless the session is
    /// stored, whose copy is written as sent first). The copy comes back when this does not
    /// apply.
    fn send_at_once(
        &mut self,
        ctx: &mut Ctx,
        at: SessionAt,
        outgoing: Outgoing,
    ) -> Result<(), Outgoing> {
        let max_queued_bytes = self.shared.limits.queues.max_bytes;
        let Some(session) = self.sessions.at_mut(at) else {
            return Err(outgoing);
        };
        let Some(conn) = session.conn else {
            return Err(outgoing);
        };
        let ahead = !session.queue.is_empty()
            || session.spilled().is_some()
            || session.inflight.owes_resends();
        if ahead
            || !session.inflight.has_room()
            || session_store::Weighed::weight(&outgoing) > max_queued_bytes
            || !self
                .delivery
                .send_queue_admits(&self.shared.limits.outbound, ctx, conn)
        {
            return Err(outgoing);
        }
        if self.durable.stores(session.expiry) {
            let client_id = session.client_id.clone();
            self.send_stored_at_once(ctx, &client_id, at, conn, outgoing);
            return Ok(());
        }
        let packet_id = session.inflight.next_packet_id();
        self.send_then_admit(ctx, conn, at, packet_id, outgoing);
        Ok(())
    }

    /// A copy for a stored session that goes out at once (see `send_at_once`): written as
    /// queued, then sent as a queued copy is (`Durability::record` merges the two writes into
    /// one `MessageSent`).
    fn send_stored_at_once(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        at: SessionAt,
        conn: ConnId,
        mut outgoing: Outgoing,
    ) {
        let write = queued_write(
            client_id,
            &mut outgoing,
            self.shared.persistence.new_seq(),
            ctx.now(),
        );
        self.durable.record(write);
        self.send_next(ctx, at, conn, outgoing);
    }

    /// Sends an unstored copy under `packet_id`, the id its session's window hands out next,
    /// then moves it into the window (no second handle on the message). A copy that cannot be
    /// sent is not admitted (counted as dropped unless the ACL filtered it); one whose
    /// connection is gone is, for the session's next connection.
    pub(super) fn send_then_admit(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        at: SessionAt,
        packet_id: PacketId,
        outgoing: Outgoing,
    ) {
        let sent = self.send_publish(ctx, conn, outgoing.view(), Some(packet_id), false);
        match sent {
            Ok(()) | Err(NotSent::Closed) => {}
            Err(NotSent::NotAuthorized) => return,
            Err(not_sent) => return self.figures.count_dropped(not_sent.drop_reason(), 1),
        }
        let Some(session) = self.sessions.at_mut(at) else {
            return;
        };
        let admitted = session.inflight.admit(outgoing.qos, outgoing);
        debug_assert!(
            matches!(admitted, Ok(id) if id == packet_id),
            "invariant: the window handed out the id the copy was sent under"
        );
        // A full window waits on the client's acknowledgements: send it now.
        if sent.is_ok() && !session.inflight.has_room() {
            ctx.expedite(conn);
        }
    }

    /// A QoS 0 copy for a session of this shard, delivered without an [`Outgoing`] of its own.
    /// False when it cannot be done here (the session moved, or copies are held for it while
    /// it moves): the caller then routes a full copy.
    pub(super) fn deliver_qos0_here(
        &mut self,
        ctx: &mut Ctx,
        subscriber: SubscriberId,
        copy: CopyView<'_>,
    ) -> bool {
        if self.delivery.mobility.holding.contains_key(&subscriber) {
            return false;
        }
        let Some(conn) = self.sessions.by_subscriber(subscriber).map(|s| s.conn) else {
            return false;
        };
        self.deliver_qos0(ctx, conn, copy);
        true
    }

    /// A QoS 0 copy for a session of this shard, connected as `conn` or not (then dropped;
    /// an expired copy is dropped by `send_publish`).
    fn deliver_qos0(&mut self, ctx: &mut Ctx, conn: Option<ConnId>, copy: CopyView<'_>) {
        match conn {
            Some(conn) => self.send_qos0(ctx, conn, copy),
            None => self.figures.count_dropped(DropReason::Offline, 1),
        }
    }

    pub(super) fn send_qos0(&mut self, ctx: &mut Ctx, conn: ConnId, copy: CopyView<'_>) {
        if !self
            .delivery
            .send_queue_admits(&self.shared.limits.outbound, ctx, conn)
        {
            self.figures.count_dropped(DropReason::SlowConsumer, 1);
            self.note_connection_drop(ctx, conn);
            return;
        }
        match self.send_publish(ctx, conn, copy, None, false) {
            // Not the client's to read: filtered, not lost.
            Ok(()) | Err(NotSent::NotAuthorized) => {}
            Err(not_sent) => self.figures.count_dropped(not_sent.drop_reason(), 1),
        }
    }

    /// Queues a QoS 1/2 copy behind the session's earlier ones (stored first when the session
    /// is), then sends what fits. The session is found by its subscriber key; its client id
    /// is cloned only where the copy is stored or mirrored.
    fn enqueue(&mut self, ctx: &mut Ctx, at: SessionAt, mut outgoing: Outgoing) {
        let memory_limit = self.shared.config.persistence.memory_queue_messages as usize;
        if self.shared.links.cluster.is_some() {
            self.cluster_side.mirror_if_offline(
                &self.shared.links,
                &self.sessions,
                ctx,
                at,
                &outgoing,
            );
        }
        let Some(session) = self.sessions.at_mut(at) else {
            return;
        };
        let stored_as = (self.durable.stores(session.expiry)).then(|| session.client_id.clone());
        let queued_write = stored_as.as_ref().map(|client_id| {
            queued_write(
                client_id,
                &mut outgoing,
                self.shared.persistence.new_seq(),
                ctx.now(),
            )
        });
        // A stored queue that spilled, or whose in-memory part is full, grows on disk only.
        let disk_only = session.spilled().is_some() || session.queue.len() >= memory_limit;
        let queued_write = match (queued_write, &stored_as) {
            (Some(write), Some(client_id)) if disk_only => {
                return self.enqueue_on_disk(ctx, client_id, outgoing.seq, write);
            }
            (write, _) => write,
        };
        let limits = &self.shared.limits.queues;
        let pushed = session.queue.push(outgoing, limits);
        let drain = needs_drain(session);
        let refuse_conn = session
            .conn
            .filter(|_| limits.policy == session_store::OverflowPolicy::Refuse);
        let (queued, dropped) = match pushed {
            Pushed::Queued => (true, Vec::new()),
            Pushed::DroppedOldest(dropped) => (true, dropped),
            Pushed::Refused { dropped, .. } => (false, dropped),
        };
        if let Some(write) = queued_write.filter(|_| queued) {
            self.durable.record(write);
        }
        self.figures
            .count_dropped(DropReason::QueueFull, dropped.len() as u64);
        self.note_session_drops(ctx, at, dropped.len() as u64 + u64::from(!queued));
        if let Some(client_id) = &stored_as {
            self.durable.forget_stored_copies(client_id, &dropped);
        }
        if !queued {
            self.figures.count_dropped(DropReason::QueueFull, 1);
            let client_id = self.sessions.at(at).map(|s| &s.client_id);
            if let Some((conn, client_id)) = refuse_conn.zip(client_id) {
                let client_id = client_id.clone();
                self.wire().disconnect_slow_consumer(ctx, &client_id, conn);
            }
            return;
        }
        if drain {
            self.drain_at(ctx, at);
        }
    }

    /// A shared-subscription member lost its connection: its unacknowledged QoS 1 copies and
    /// its queued (never sent) copies that came through a shared group go to another member.
    /// QoS 2 copies already sent stay: MQTT 5.0 4.8.2 requires them to complete with this
    /// session.
    pub(super) fn redistribute_shared(&mut self, ctx: &mut Ctx, session: &mut Session) {
        let stored = self.durable.stores(session.expiry);
        let inflight = session.inflight.take_qos1_where(|o| o.shared().is_some());
        let queued = session.queue.take_where(|o| o.shared().is_some());
        if stored {
            for (packet_id, _) in &inflight {
                self.durable.record(SessionWrite::InflightAcked {
                    client_id: session.client_id.clone(),
                    packet_id: *packet_id,
                });
            }
            self.durable
                .forget_stored_copies(&session.client_id, &queued);
        }
        let copies = inflight.into_iter().map(|(_, o)| o).chain(queued);
        for mut outgoing in copies {
            // The next member stores its own copy under its own sequence number.
            outgoing.seq = 0;
            self.give_to_other_member(ctx, session.subscriber, outgoing);
        }
    }

    /// Sends a copy to a member of its shared group other than `departed`.
    fn give_to_other_member(&mut self, ctx: &mut Ctx, departed: SubscriberId, outgoing: Outgoing) {
        let Some(group) = outgoing.shared() else {
            return;
        };
        let member = self
            .replication
            .replica
            .table
            .group_members(group)
            .map(|s| s.subscriber)
            .find(|s| *s != departed);
        match member {
            Some(subscriber) => {
                let recipient = Recipient {
                    subscriber,
                    outgoing,
                };
                match self.replication.replica.owner(subscriber) {
                    owner if owner == self.id => self.deliver(ctx, recipient),
                    owner => {
                        self.delivery.routes.route_buf[owner.index()].push_recipient(recipient)
                    }
                }
            }
            None => self.figures.count_dropped(DropReason::Offline, 1),
        }
    }
}

/// Whether draining `session` should send or read anything now: it is connected with re-sends
/// owed, or with queued copies and half its window free
/// ([`session_store::InflightWindow::refill_due`]), or part of its queue is on disk. A copy
/// queued behind a full window waits for the acknowledgements that free half of it, then goes
/// out with the others in one write.
pub(super) fn needs_drain(session: &Session) -> bool {
    let inflight = &session.inflight;
    let sends = inflight.owes_resends() || (!session.queue.is_empty() && inflight.refill_due());
    (session.conn.is_some() && sends) || session.spilled().is_some()
}

/// The write that stores `outgoing` as queued for `client_id` under `seq` (set on the copy).
fn queued_write(
    client_id: &MqttStr,
    outgoing: &mut Outgoing,
    seq: u64,
    now: std::time::Instant,
) -> SessionWrite {
    outgoing.seq = seq;
    SessionWrite::MessageQueued {
        client_id: client_id.clone(),
        seq,
        message: Box::new(stored_message(outgoing, now)),
    }
}

impl Wire<'_> {
    /// A session's queue is full under the `disconnect` policy: its client goes (0x97).
    pub(super) fn disconnect_slow_consumer(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        conn: ConnId,
    ) {
        debug!(
            client = client_id.as_str(),
            "slow consumer: queue full (messages or bytes), disconnecting"
        );
        self.send_disconnect(ctx, conn, ReasonCode::QuotaExceeded);
        self.close_connection(ctx, conn);
    }
}

impl Delivery {
    /// A copy for a session this shard does not hold: forward it where the session went.
    fn forward(
        &mut self,
        replica: &ReplicaState,
        figures: &Figures,
        shard: ShardId,
        recipient: Recipient,
    ) {
        let target = self
            .mobility
            .moved
            .get(&recipient.subscriber)
            .map_or_else(|| replica.owner(recipient.subscriber), |moved| moved.to);
        if target == shard {
            figures.count_dropped(DropReason::Offline, 1);
        } else {
            self.routes.forward_buf[target.index()].push_recipient(recipient);
        }
    }
}

impl Durability {
    /// An admitted copy could not be sent (not `Closed`): its flow ends, counted as dropped
    /// unless the ACL filtered it.
    pub(super) fn first_send_failed(
        &mut self,
        sessions: &mut Sessions,
        figures: &Figures,
        client_id: &MqttStr,
        packet_id: PacketId,
        not_sent: NotSent,
    ) {
        self.abandon_inflight(sessions, client_id, packet_id);
        if not_sent != NotSent::NotAuthorized {
            figures.count_dropped(not_sent.drop_reason(), 1);
        }
    }
}
