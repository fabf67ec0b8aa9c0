//! MQTT 5 enhanced authentication (section 4.12): the AUTH exchange at CONNECT and
//! re-authentication after it, driven here from the packets and the auth workers' answers;
//! the methods' rounds and the per-connection state are in `exchanges.rs`.
//!
//! At CONNECT with a configured Authentication Method the connection enters
//! `Phase::Authenticating`: the broker answers AUTH 0x18 Continue authentication with the
//! method's data, the client answers with AUTH 0x18, until the method succeeds (CONNACK 0x00
//! with the method and its final data; the authenticated user becomes the CONNECT's username,
//! so the session's owner and `%u` of the ACL) or refuses (CONNACK 0x87). Meanwhile only AUTH
//! and DISCONNECT are accepted (anything else: CONNACK 0x82), the CONNECT timeout keeps running
//! and at most `MAX_ROUNDS` AUTH packets are taken. After CONNACK, AUTH 0x19 Re-authenticate
//! with the same method runs the exchange again while the session goes on: it ends with AUTH
//! 0x00 Success, or DISCONNECT 0x87 (also when it authenticates another user); another
//! method, or AUTH from a client that connected without one, is a protocol error (DISCONNECT
//! 0x82).

use access::gatekeeper::exchange::ExchangeOutcome;
use access::gatekeeper::grant::ClientGrant;
use bytes::Bytes;
use codec::{Auth, AuthProperties, Connect, MqttStr, Packet, ReasonCode};
use ring_runtime::ConnId;
use tracing::debug;

use super::exchanges::{
    Asker, Authenticated, ConnectExchange, MAX_ROUNDS, Round, first_round, offers_method,
};
use super::parts::Wire;
use super::{BrokerShard, Ctx, Fault, client_id_of};
use crate::conn::Phase;

impl BrokerShard {
    /// A CONNECT naming an Authentication Method: its first round.
    pub(super) fn start_exchange(&mut self, ctx: &mut Ctx, conn: ConnId, connect: Connect) {
        let props = &connect.properties;
        let Some(method) = props.authentication_method.clone() else {
            return;
        };
        let token = self.auth.exchanges.token();
        let asker = Asker::connecting(&self.shared, self.id, ctx, (conn, token), &connect);
        let round = first_round(&asker, method.as_str(), props.authentication_data.as_ref());
        self.connect_round_done(ctx, conn, (connect, 0), round);
    }

    /// Where a round of the CONNECT's exchange leaves it.
    fn connect_round_done(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        (connect, rounds): (Connect, u8),
        round: Round,
    ) {
        let method = connect.properties.authentication_method.clone();
        let method = method.expect("invariant: an exchange has a method");
        let (step, data) = match round {
            Round::Continue(step, data) => (step, Some(data)),
            Round::Wait(step) => (step, None),
            Round::Done {
                username,
                data,
                grant,
            } => {
                if let Some(connection) = self.conns.get_mut(&conn) {
                    connection.phase = Phase::AwaitingConnect;
                }
                let grant = grant.unwrap_or_default();
                return self.exchange_succeeded(ctx, conn, (connect, grant), username, data);
            }
            Round::Refuse(reason) => {
                let user = connect.username.as_ref().map(|u| u.as_str());
                return self.refuse_login(ctx, conn, reason, user);
            }
        };
        if let Some(connection) = self.conns.get_mut(&conn) {
            connection.phase = Phase::Authenticating;
        }
        let exchange = ConnectExchange {
            connect,
            step,
            rounds,
        };
        let budget = &self.shared.limits.partial_frames;
        if let Err(refused) = self.auth.exchanges.hold(conn, exchange, budget) {
            debug!("AUTH exchange refused: limits.max_partial_frame_bytes is spent");
            let user = refused.connect.username.as_ref().map(|u| u.as_str());
            return self.refuse_login(ctx, conn, ReasonCode::QuotaExceeded, user);
        }
        if let Some(data) = data {
            let reason = ReasonCode::ContinueAuthentication;
            self.wire()
                .send_auth(ctx, conn, reason, &method, Some(data));
        }
    }

    /// An AUTH before CONNACK: the next round of the CONNECT's exchange.
    pub(super) fn exchange_round(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        auth: Auth,
    ) -> Result<(), Fault> {
        if !self.conns.is_authenticating(conn) {
            return Err(Fault::protocol("AUTH before CONNECT"));
        }
        let budget = &self.shared.limits.partial_frames;
        let Some(exchange) = self.auth.exchanges.take(conn, budget) else {
            return Err(Fault::protocol("AUTH without an exchange in progress"));
        };
        let method = exchange.connect.properties.authentication_method.clone();
        let method = method.expect("invariant: an exchange has a method");
        check_continue(&auth, &method)?;
        let rounds = exchange.rounds + 1;
        let round = if rounds > MAX_ROUNDS {
            debug!(rounds, "AUTH exchange refused: too many rounds");
            Round::Refuse(ReasonCode::NotAuthorized)
        } else {
            let token = self.auth.exchanges.token();
            let connect = &exchange.connect;
            let asker = Asker::connecting(&self.shared, self.id, ctx, (conn, token), connect);
            let data = auth.properties.authentication_data.as_ref();
            exchange.step.round(&asker, method.as_str(), data)
        };
        self.connect_round_done(ctx, conn, (exchange.connect, rounds), round);
        Ok(())
    }

    /// The exchange authenticated the client (as `username`, when the method names one): the
    /// CONNECT goes on as theirs, its CONNACK to carry the method and `data`.
    fn exchange_succeeded(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        (mut connect, grant): (Connect, Box<ClientGrant>),
        username: Option<MqttStr>,
        data: Option<Bytes>,
    ) {
        let method = connect.properties.authentication_method.clone();
        let method = method.expect("invariant: an exchange has a method");
        if username.is_some() {
            connect.username = username;
        }
        connect.password = None;
        connect.properties.authentication_data = data;
        let authenticated = Authenticated {
            method,
            username: connect.username.clone(),
            reauth: None,
        };
        self.auth
            .exchanges
            .authenticated
            .insert(conn, authenticated);
        self.admit(ctx, conn, connect, grant);
    }

    /// A worker's answer for an exchange (at CONNECT or a re-authentication).
    pub(super) fn exchange_answered(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        token: u64,
        outcome: ExchangeOutcome,
    ) {
        let exchanges = &mut self.auth.exchanges;
        if exchanges.connect_waits_for(conn, token) {
            let budget = &self.shared.limits.partial_frames;
            let Some(exchange) = exchanges.take(conn, budget) else {
                return;
            };
            let round = exchange.step.answered(&self.shared, outcome);
            return self.connect_round_done(ctx, conn, (exchange.connect, exchange.rounds), round);
        }
        let reauth = exchanges
            .authenticated
            .get(&conn)
            .and_then(|a| a.reauth.as_ref());
        if reauth.is_some_and(|(step, _)| step.waits_for() == Some(token))
            && let Some(mut known) = exchanges.authenticated.remove(&conn)
            && let Some((step, rounds)) = known.reauth.take()
        {
            let round = step.answered(&self.shared, outcome);
            self.reauth_answered(ctx, conn, (known, rounds), round);
        }
    }

    /// An AUTH after CONNACK: a re-authentication starts or goes on.
    pub(super) fn reauthenticate(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        auth: Auth,
    ) -> Result<(), Fault> {
        let Some(mut known) = self.auth.exchanges.authenticated.remove(&conn) else {
            return Err(Fault::protocol(
                "AUTH from a client that connected without a method",
            ));
        };
        let named = auth.properties.authentication_method.as_ref();
        if named != Some(&known.method) {
            return Err(Fault::protocol("AUTH with another authentication method"));
        }
        let token = self.auth.exchanges.token();
        let client_id = client_id_of(&self.conns, &self.sessions, conn).unwrap_or_default();
        let mut asker = Asker::reauthenticating(
            &self.shared,
            self.id,
            ctx,
            (conn, token),
            client_id.as_str(),
        );
        asker.username = known.username.as_ref().map(|u| u.as_str());
        let data = auth.properties.authentication_data.as_ref();
        let (round, rounds) = match (auth.reason_code, known.reauth.take()) {
            (ReasonCode::ReAuthenticate, None) => {
                (first_round(&asker, known.method.as_str(), data), 1)
            }
            (ReasonCode::ContinueAuthentication, Some((_, rounds))) if rounds >= MAX_ROUNDS => {
                debug!(rounds, "re-authentication refused: too many rounds");
                (Round::Refuse(ReasonCode::NotAuthorized), rounds)
            }
            (ReasonCode::ContinueAuthentication, Some((step, rounds))) => {
                (step.round(&asker, known.method.as_str(), data), rounds + 1)
            }
            (reason, _) => {
                return Err(Fault::protocol(format!(
                    "AUTH {} out of place in a re-authentication",
                    reason.name()
                )));
            }
        };
        self.reauth_answered(ctx, conn, (known, rounds), round);
        Ok(())
    }

    /// Where a re-authentication round leaves the client.
    fn reauth_answered(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        (mut known, rounds): (Authenticated, u8),
        round: Round,
    ) {
        match round {
            Round::Continue(step, data) => {
                let reason = ReasonCode::ContinueAuthentication;
                self.wire()
                    .send_auth(ctx, conn, reason, &known.method, Some(data));
                known.reauth = Some((step, rounds));
            }
            Round::Wait(step) => known.reauth = Some((step, rounds)),
            Round::Done { username, data, .. }
                if username.is_none() || username == known.username =>
            {
                self.wire()
                    .send_auth(ctx, conn, ReasonCode::Success, &known.method, data);
            }
            Round::Done { username, .. } => {
                debug!(?username, was = ?known.username, "re-authentication as another user refused");
                return self.reauth_failed(ctx, conn, ReasonCode::NotAuthorized);
            }
            Round::Refuse(reason) => return self.reauth_failed(ctx, conn, reason),
        }
        self.auth.exchanges.authenticated.insert(conn, known);
    }

    /// A failed re-authentication: DISCONNECT 0x87 Not authorized (0x82 for a client out of
    /// turn), then close.
    fn reauth_failed(&mut self, ctx: &mut Ctx, conn: ConnId, reason: ReasonCode) {
        let reason = if reason == ReasonCode::ProtocolError {
            reason
        } else {
            ReasonCode::NotAuthorized
        };
        debug!(
            ?conn,
            reason = reason.name(),
            "re-authentication failed: disconnecting"
        );
        self.wire().send_disconnect(ctx, conn, reason);
        self.wire().close_connection(ctx, conn);
    }
}

/// An AUTH before CONNACK must be 0x18 Continue authentication with the CONNECT's method.
fn check_continue(auth: &Auth, method: &MqttStr) -> Result<(), Fault> {
    if auth.reason_code != ReasonCode::ContinueAuthentication {
        return Err(Fault::protocol(format!(
            "AUTH {} during the CONNECT's exchange",
            auth.reason_code.name()
        )));
    }
    if auth.properties.authentication_method.as_ref() != Some(method) {
        return Err(Fault::protocol("AUTH with another authentication method"));
    }
    Ok(())
}

impl Wire<'_> {
    /// Sends AUTH `reason` with `method` and `data`.
    fn send_auth(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        reason: ReasonCode,
        method: &MqttStr,
        data: Option<Bytes>,
    ) {
        let properties = AuthProperties {
            authentication_method: Some(method.clone()),
            authentication_data: data,
            ..AuthProperties::default()
        };
        let auth = Auth {
            reason_code: reason,
            properties,
        };
        self.send_packet(ctx, conn, &Packet::Auth(auth));
    }
}

/// Whether the CONNECT names no Authentication Method, or one this broker is configured for.
pub(super) fn method_offered(shared: &crate::shared::Shared, connect: &Connect) -> bool {
    match &connect.properties.authentication_method {
        Some(method) => offers_method(shared, method.as_str()),
        None => true,
    }
}
