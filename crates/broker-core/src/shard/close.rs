//! The end of connections and sessions: DISCONNECT, keep-alive and CONNECT timeouts, wills,
//! session expiry and broker shutdown.

use std::sync::atomic::Ordering;

use codec::{Disconnect, MqttStr, ProtocolVersion, ReasonCode};
use ring_runtime::{CloseReason, ConnId};
use tracing::debug;

use super::lifecycle::LifecycleLines;
use super::timer_book::TimerPurpose;
use super::{BrokerShard, Ctx, Fault, client_id_of};
use crate::directory::SessionOwner;
use crate::message::Change;
use crate::metrics::DropReason;
use crate::session::Session;
use session_store::SessionExpiry;
use session_store::storage::SessionWrite;
use std::time::SystemTime;

impl BrokerShard {
    /// DISCONNECT from the client: a normal one deletes the will; 0x04 keeps it. A 5.0 client may
    /// change its session expiry, but not from 0 to non-zero.
    pub(super) fn handle_disconnect(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        disconnect: Disconnect,
    ) -> Result<(), Fault> {
        let max_expiry = self.shared.config.sessions.max_session_expiry;
        let Some(connection) = self.conns.get_mut(&conn) else {
            return Ok(());
        };
        connection.publish_will = disconnect.reason_code == ReasonCode::DisconnectWithWillMessage;
        let session = connection
            .session()
            .and_then(|s| self.sessions.by_subscriber_mut(s))
            .filter(|s| s.conn == Some(conn));
        if let (Some(session), Some(seconds)) =
            (session, disconnect.properties.session_expiry_interval)
        {
            if session.expiry == SessionExpiry::OnClose && seconds != 0 {
                return Err(Fault::protocol(
                    "DISCONNECT sets a session expiry after CONNECT set 0",
                ));
            }
            // Applied now: the session ends (or is kept) by it when this connection closes.
            let was_stored = self.durable.stores(session.expiry);
            session.expiry = SessionExpiry::from_interval(seconds, max_expiry);
            if was_stored && session.expiry == SessionExpiry::OnClose {
                let client_id = session.client_id.clone();
                self.durable
                    .record(SessionWrite::SessionRemoved { client_id });
            }
        }
        self.wire().close_connection(ctx, conn);
        Ok(())
    }

    /// The runtime finished closing `conn`.
    pub(super) fn connection_closed(&mut self, ctx: &mut Ctx, conn: ConnId, reason: CloseReason) {
        self.door.proxy_waits.remove(&conn);
        self.delivery.retained.forget(conn);
        self.replication.order_waits.forget(conn);
        self.cluster_side.owning.connection_closed(conn);
        let Some(mut connection) = self.conns.remove(&conn) else {
            return;
        };
        let mark = connection.door_mark();
        (self.door).address_released(&self.shared.door.guard, conn, mark);
        connection.discard_carry(&self.shared.limits.partial_frames);
        self.shared.door.connections.fetch_sub(1, Ordering::Relaxed);
        self.door.connection_ended(&self.figures, conn);
        self.auth.acl_clients.remove(&conn);
        self.figures.traces.forget(conn);
        self.auth.rechecks.recheck_closed(conn);
        let budget = &self.shared.limits.partial_frames;
        (self.auth.logins).login_closed(&mut self.timers, ctx, (conn, budget));
        (self.auth.exchanges).exchange_closed(conn, &self.shared.limits.partial_frames);
        self.auth.topic_wait_closed(conn);
        if connection.counted {
            self.figures.gauges.connected_clients -= 1;
        }
        self.delivery.routes.backlog.remove(&conn);
        self.door
            .throttle
            .throttle_closed(&mut self.timers, ctx, conn);
        debug!(?reason, "connection closed");
        let Some(client_id) = connection
            .session()
            .and_then(|s| self.sessions.client_id(s).cloned())
        else {
            return;
        };
        let mut lines = LifecycleLines {
            shared: &self.shared,
            timers: &mut self.timers,
            shard: self.id,
        };
        lines.log_disconnected(ctx, &client_id, connection.protocol, reason);
        let owns_session = self
            .sessions
            .get(&client_id)
            .is_some_and(|s| s.conn == Some(conn));
        if owns_session {
            self.session_disconnected(ctx, &client_id, connection.publish_will);
        }
    }

    /// A session lost its connection: publish or schedule its will, redistribute its shared
    /// messages, then end it now or arm its expiry.
    pub(super) fn session_disconnected(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        publish_will: bool,
    ) {
        let Some(mut session) = self.sessions.remove(client_id) else {
            return;
        };
        session.conn = None;
        self.redistribute_shared(ctx, &mut session);
        let will = session.will.take().filter(|_| publish_will);
        let now = ctx.now();
        match (will, session.expiry) {
            (Some(pending), SessionExpiry::After(expiry))
                if !pending.delay.is_zero() && expiry != 0 =>
            {
                let at = now + pending.delay.min(seconds(expiry));
                session.will = Some(pending);
                let timer = self
                    .timers
                    .arm(ctx, at, TimerPurpose::WillDelay(client_id.clone()));
                session.set_will_timer(Some(timer));
            }
            (Some(pending), SessionExpiry::Never) if !pending.delay.is_zero() => {
                let at = now + pending.delay;
                session.will = Some(pending);
                let timer = self
                    .timers
                    .arm(ctx, at, TimerPurpose::WillDelay(client_id.clone()));
                session.set_will_timer(Some(timer));
            }
            (Some(pending), _) => self.publish_will(ctx, client_id, pending.will),
            (None, _) => {}
        }
        if self.durable.stores(session.expiry) {
            let owner = self.shared.directory.owner_of(client_id.as_str());
            record_disconnected(&mut self.durable, &session, &owner);
        }
        self.cluster_side
            .mirror_offline(&self.shared.links, ctx, &session);
        match session.expiry {
            // `After(0)`: a stored session resumed with expiry 0 (`connect.rs`).
            SessionExpiry::OnClose | SessionExpiry::After(0) => {
                self.end_session(ctx, *session);
            }
            SessionExpiry::After(expiry) => {
                let at = now + seconds(expiry);
                let timer =
                    self.timers
                        .arm(ctx, at, TimerPurpose::SessionExpiry(client_id.clone()));
                session.set_expiry_timer(Some(timer));
                self.sessions.insert(session);
            }
            SessionExpiry::Never => {
                self.sessions.insert(session);
            }
        }
    }

    /// Keeps a session that has no connection (its client left during a hand-over).
    pub(super) fn keep_detached(
        &mut self,
        ctx: &mut Ctx,
        session: Box<Session>,
        _protocol: ProtocolVersion,
    ) {
        let client_id = session.client_id.clone();
        self.sessions.insert(session);
        self.session_disconnected(ctx, &client_id, false);
    }

    /// A disconnected session's expiry ran out: its pending will goes out, then it ends.
    pub(super) fn session_expired(&mut self, ctx: &mut Ctx, client_id: &MqttStr) {
        let Some(mut session) = self.sessions.remove(client_id) else {
            return;
        };
        if session.conn.is_some() {
            self.sessions.insert(session);
            return;
        }
        session.set_expiry_timer(None);
        if let Some(pending) = session.will.take() {
            self.publish_will(ctx, client_id, pending.will);
        }
        self.end_session(ctx, *session);
    }

    /// A delayed will's delay ran out while its session stayed disconnected.
    pub(super) fn will_delay_elapsed(&mut self, ctx: &mut Ctx, client_id: &MqttStr) {
        let Some(session) = self.sessions.get_mut(client_id) else {
            return;
        };
        session.set_will_timer(None);
        if session.conn.is_some() {
            return;
        }
        if let Some(pending) = session.will.take() {
            // Stored without it: a restart must not publish it again (the expiry then counts
            // from now: at most the will delay longer).
            if self.durable.stores(session.expiry) {
                let owner = self.shared.directory.owner_of(client_id.as_str());
                record_disconnected(&mut self.durable, session, &owner);
            }
            self.publish_will(ctx, client_id, pending.will);
        }
    }

    /// Ends a session held by this shard: its state goes, and its directory entry if it still
    /// names this session.
    pub(super) fn end_session(&mut self, ctx: &mut Ctx, session: Session) {
        let client_id = session.client_id.clone();
        let subscriber = session.subscriber;
        self.end_session_state(ctx, session);
        self.shared.links.owner_record_ended(&client_id);
        self.delivery.mobility.forget_directory_entry(
            &self.shared.directory,
            self.id,
            &client_id,
            Some(subscriber),
        );
    }

    /// Removes a session from the store, its subscriptions from every replica, and counts its
    /// undelivered messages as dropped. The directory is not touched (the caller knows whether
    /// it still names it).
    pub(super) fn end_session_state(&mut self, ctx: &mut Ctx, session: Session) {
        if self.durable.stores(session.expiry) {
            let client_id = session.client_id.clone();
            self.durable
                .record(SessionWrite::SessionRemoved { client_id });
        }
        self.drop_session_state(ctx, session);
    }

    /// [`Self::end_session_state`] leaving what the store holds of the session as it is.
    pub(super) fn drop_session_state(&mut self, ctx: &mut Ctx, mut session: Session) {
        self.timers.disarm_session_timers(ctx, &mut session);
        self.cluster_side
            .mirror_forget(&self.shared.links, &session.client_id);
        let subscriber = session.subscriber;
        for (text, subscription) in session.subscriptions.drain() {
            (self.shared.topic_rules.exclusive).release(text.as_str(), &session.client_id);
            self.figures.gauges.subscriptions = self.figures.gauges.subscriptions.saturating_sub(1);
            let change = router::SubscriptionChange::Unsubscribe {
                subscriber,
                filter: subscription.filter,
            };
            self.figures
                .broadcast(ctx, &self.shared.order, Change::Subscription(change));
        }
        self.figures
            .broadcast(ctx, &self.shared.order, Change::Gone { subscriber });
        let undelivered = session.inflight.len() + session.queue.len();
        self.figures
            .count_dropped(DropReason::SessionEnded, undelivered as u64);
    }

    /// The broker is stopping: clients get DISCONNECT 0x8B and, as their connections end
    /// without a normal DISCONNECT, their wills are published.
    pub(super) fn shutdown(&mut self, ctx: &mut Ctx) {
        let connected: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.is_connected())
            .map(|(id, _)| id)
            .collect();
        for conn in connected {
            self.wire()
                .send_disconnect(ctx, conn, ReasonCode::ServerShuttingDown);
            let Some(client_id) = client_id_of(&self.conns, &self.sessions, conn) else {
                continue;
            };
            if let Some(pending) = self
                .sessions
                .get_mut(&client_id)
                .and_then(|s| s.will.take())
            {
                self.publish_will(ctx, &client_id, pending.will);
            }
        }
        self.delivery
            .flush_routes(ctx, &mut self.durable, &self.figures, self.id);
    }
}

/// A stored session lost its connection: its will as it stands now (kept while delayed, gone
/// once published), its `owner` (unchanged) and the time its expiry counts from.
fn record_disconnected(
    durable: &mut super::durability::Durability,
    session: &Session,
    owner: &SessionOwner,
) {
    durable.record_saved(session, owner);
    durable.record(SessionWrite::SessionDisconnected {
        client_id: session.client_id.clone(),
        at: SystemTime::now(),
    });
}

/// A whole number of seconds as a duration.
fn seconds(secs: u32) -> std::time::Duration {
    std::time::Duration::from_secs(u64::from(secs))
}
