//! Session takeover: a client connects again, on this shard or another. The shared directory
//! names the shard that holds (or will hold) each session; a session moves as a whole through
//! the mailboxes, and the shard it left forwards deliveries that were already on their way.

use codec::{Connect, MqttStr, ReasonCode};
use ring_runtime::{ConnId, ShardId};
use tracing::debug;

use super::fence::Moved;
use super::{BrokerShard, Ctx};
use crate::conn::Phase;
use crate::message::{Change, SessionTransfer, ShardMsg, TakeoverRequest};
use crate::session::Session;

impl BrokerShard {
    /// The connection on this shard waiting for `client_id`'s session, if any.
    pub(super) fn awaiting_conn(&self, client_id: &MqttStr) -> Option<ConnId> {
        self.awaiting.get(client_id).map(|(conn, _)| *conn)
    }

    /// Parks `conn` until the session arrives from another shard.
    pub(super) fn wait_for_session(&mut self, conn: ConnId, connect: Connect) {
        if let Some(connection) = self.conns.get_mut(&conn) {
            connection.phase = Phase::AwaitingSession;
        }
        self.awaiting
            .insert(connect.client_id.clone(), (conn, Box::new(connect)));
    }

    /// Asks `holder` to hand over the session of `connect`'s client.
    pub(super) fn request_takeover(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        connect: Connect,
        holder: ShardId,
    ) {
        let request = TakeoverRequest {
            client_id: connect.client_id.clone(),
            to_shard: self.id,
            to_conn: conn,
            clean_start: connect.clean_start,
        };
        self.wait_for_session(conn, connect);
        self.post(ctx, holder, ShardMsg::Takeover(request));
    }

    /// Another shard took the client: give the session away (or discard it on Clean Start).
    pub(super) fn hand_over(&mut self, ctx: &mut Ctx, request: TakeoverRequest) {
        if let Some(subscriber) = self.sessions.get(&request.client_id).map(|s| s.subscriber) {
            self.release_all_held(ctx, subscriber);
        }
        if let Some(mut session) = self.sessions.remove(&request.client_id) {
            self.detach_connection(ctx, &mut session, true);
            let session = self.release(ctx, session, &request);
            self.send_transfer(ctx, request, session);
        } else if self.awaiting.contains_key(&request.client_id) {
            // Our own hand-over is still on its way: pass the session on when it arrives.
            self.pending_handoffs
                .insert(request.client_id.clone(), request);
        } else {
            self.send_transfer(ctx, request, None);
        }
    }

    /// Prepares a session that leaves this shard: timers off, a delayed will discarded (a new
    /// connection arrived before the delay ran out). On Clean Start it ends here.
    fn release(
        &mut self,
        ctx: &mut Ctx,
        mut session: Box<Session>,
        request: &TakeoverRequest,
    ) -> Option<Box<Session>> {
        self.disarm_session_timers(ctx, &mut session);
        session.will = None;
        if request.clean_start {
            self.end_session_state(ctx, *session);
            return None;
        }
        let fences_left = self.route_buf.len();
        let moved = Moved {
            to: request.to_shard,
            fences_left,
        };
        self.moved.insert(session.subscriber, moved);
        Some(session)
    }

    fn send_transfer(
        &mut self,
        ctx: &mut Ctx,
        request: TakeoverRequest,
        session: Option<Box<Session>>,
    ) {
        let transfer = SessionTransfer {
            client_id: request.client_id,
            to_conn: request.to_conn,
            session,
        };
        self.post(ctx, request.to_shard, ShardMsg::Transfer(transfer));
    }

    /// A session arrived from another shard (or the news that there is none).
    pub(super) fn take_over(&mut self, ctx: &mut Ctx, transfer: SessionTransfer) {
        let client_id = transfer.client_id;
        let waiting = self.awaiting.remove(&client_id);
        if let Some(request) = self.pending_handoffs.remove(&client_id) {
            if let Some((conn, _)) = waiting {
                self.close_connection(ctx, conn);
            }
            let session = transfer
                .session
                .and_then(|s| self.release(ctx, s, &request));
            self.send_transfer(ctx, request, session);
            return;
        }
        let connect = waiting.filter(|(conn, _)| self.stop_waiting(*conn));
        if let Some(session) = &transfer.session {
            let subscriber = session.subscriber;
            self.broadcast(
                ctx,
                Change::Owner {
                    subscriber,
                    shard: self.id,
                },
            );
            self.hold_until_fenced(ctx, subscriber);
        }
        match (connect, transfer.session) {
            (Some((conn, connect)), Some(session)) => {
                self.complete_connect(ctx, conn, *connect, session, true, false);
            }
            (Some((conn, connect)), None) => {
                let fresh = self.fresh_session(ctx, &client_id);
                self.complete_connect(ctx, conn, *connect, fresh, false, false);
            }
            (None, Some(session)) => {
                let protocol = session.protocol;
                self.keep_detached(ctx, session, protocol);
            }
            (None, None) => self.forget_directory_entry(&client_id, None),
        }
    }

    /// Whether `conn` is still open and waiting for a session; if so it stops waiting (its
    /// CONNECT is completed next).
    fn stop_waiting(&mut self, conn: ConnId) -> bool {
        let Some(connection) = self.conns.get_mut(&conn) else {
            return false;
        };
        let waiting = connection.phase == Phase::AwaitingSession;
        if waiting {
            connection.phase = Phase::AwaitingConnect;
        }
        waiting
    }

    /// Detaches a session from its connection, if it has one: a taken-over connection gets
    /// DISCONNECT 0x8E, and its will is published now unless it has a delay (a new connection
    /// arrived before the delay elapsed, so a delayed will is never sent).
    pub(super) fn detach_connection(
        &mut self,
        ctx: &mut Ctx,
        session: &mut Session,
        taken_over: bool,
    ) {
        let Some(old) = session.conn.take() else {
            return;
        };
        let will = session.will.take();
        if let Some(connection) = self.conns.get_mut(&old) {
            connection.session = None;
            let publish_will = connection.publish_will;
            debug!(conn = ?old, client = session.client_id.as_str(), "session taken over");
            if taken_over {
                self.send_disconnect(ctx, old, ReasonCode::SessionTakenOver);
            }
            self.close_connection(ctx, old);
            if let Some(pending) = will.filter(|w| publish_will && w.delay.is_zero()) {
                self.publish_will(ctx, &session.client_id, pending.will);
            }
        }
    }

    /// Removes the directory entry for `client_id` if it still points at this shard (and at
    /// `subscriber`, when given).
    pub(super) fn forget_directory_entry(
        &mut self,
        client_id: &MqttStr,
        subscriber: Option<router::SubscriberId>,
    ) {
        let me = self.id;
        self.shared
            .sessions
            .remove_if(client_id.as_str(), |_, location| {
                location.shard == me && subscriber.is_none_or(|s| s == location.subscriber)
            });
    }
}
