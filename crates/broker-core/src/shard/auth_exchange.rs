//! MQTT 5 enhanced authentication (section 4.12): the AUTH exchange at CONNECT and
//! re-authentication after it, driven here from the packets; the methods' rounds and the
//! per-connection state are in `exchanges.rs`.
//!
//! At CONNECT with a configured Authentication Method the connection enters
//! `Phase::Authenticating`: the broker answers AUTH 0x18 Continue authentication with the
//! method's data, the client answers with AUTH 0x18, until the method succeeds (CONNACK 0x00
//! with the method and its final data; the authenticated user becomes the CONNECT's username,
//! so the session's owner and `%u` of the ACL) or refuses (CONNACK 0x87). Meanwhile only AUTH
//! and DISCONNECT are accepted (anything else: CONNACK 0x82), the CONNECT timeout keeps running
//! and at most `MAX_ROUNDS` AUTH packets are taken. After CONNACK, AUTH 0x19 Re-authenticate
//! with the same method runs the exchange again while the session goes on: it ends with AUTH
//! 0x00 Success, or DISCONNECT 0x87; another method, or AUTH from a client that connected
//! without one, is a protocol error (DISCONNECT 0x82).

use codec::{Auth, AuthProperties, Connect, MqttStr, Packet, ReasonCode};
use ring_runtime::ConnId;
use tracing::debug;

use super::exchanges::{
    Authenticated, ConnectExchange, MAX_ROUNDS, Round, first_round, offers_method,
};
use super::parts::Wire;
use super::{BrokerShard, Ctx, Fault};
use crate::conn::Phase;

impl BrokerShard {
    /// A CONNECT naming an Authentication Method: its first round.
    pub(super) fn start_exchange(&mut self, ctx: &mut Ctx, conn: ConnId, connect: Connect) {
        let props = &connect.properties;
        let Some(method) = props.authentication_method.clone() else {
            return;
        };
        match first_round(
            &self.shared,
            method.as_str(),
            props.authentication_data.as_ref(),
        ) {
            Round::Continue(step, data) => {
                self.wire()
                    .send_auth(ctx, conn, ReasonCode::ContinueAuthentication, &method, data);
                if let Some(connection) = self.conns.get_mut(&conn) {
                    connection.phase = Phase::Authenticating;
                }
                let exchange = ConnectExchange {
                    connect,
                    step,
                    rounds: 0,
                };
                self.auth.exchanges.connecting.insert(conn, exchange);
            }
            Round::Done { username, data } => {
                self.exchange_succeeded(ctx, conn, connect, username, data)
            }
            Round::Refuse(reason) => {
                let user = connect.username.as_ref().map(|u| u.as_str());
                self.refuse_login(ctx, conn, reason, user);
            }
        }
    }

    /// Whether `conn`'s CONNECT is in its AUTH exchange.
    pub(super) fn is_authenticating(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| c.phase == Phase::Authenticating)
    }

    /// An AUTH before CONNACK: the next round of the CONNECT's exchange.
    pub(super) fn exchange_round(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        auth: Auth,
    ) -> Result<(), Fault> {
        if !self.is_authenticating(conn) {
            return Err(Fault::protocol("AUTH before CONNECT"));
        }
        let Some(mut exchange) = self.auth.exchanges.connecting.remove(&conn) else {
            return Err(Fault::protocol("AUTH without an exchange in progress"));
        };
        let method = exchange.connect.properties.authentication_method.clone();
        check_continue(&auth, method.as_ref())?;
        exchange.rounds += 1;
        if exchange.rounds > MAX_ROUNDS {
            debug!(
                rounds = exchange.rounds,
                "AUTH exchange refused: too many rounds"
            );
            let user = exchange.connect.username.as_ref().map(|u| u.as_str());
            self.refuse_login(ctx, conn, ReasonCode::NotAuthorized, user);
            return Ok(());
        }
        let data = auth.properties.authentication_data.as_ref();
        match exchange.step.round(data) {
            Round::Continue(step, data) => {
                let method = method.expect("invariant: an exchange has a method");
                self.wire()
                    .send_auth(ctx, conn, ReasonCode::ContinueAuthentication, &method, data);
                exchange.step = step;
                self.auth.exchanges.connecting.insert(conn, exchange);
            }
            Round::Done { username, data } => {
                if let Some(connection) = self.conns.get_mut(&conn) {
                    connection.phase = Phase::AwaitingConnect;
                }
                self.exchange_succeeded(ctx, conn, exchange.connect, username, data);
            }
            Round::Refuse(reason) => {
                let user = exchange.connect.username.as_ref().map(|u| u.as_str());
                self.refuse_login(ctx, conn, reason, user);
            }
        }
        Ok(())
    }

    /// The exchange authenticated `username`: the CONNECT goes on as theirs, its CONNACK to
    /// carry the method and `data`.
    fn exchange_succeeded(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        mut connect: Connect,
        username: MqttStr,
        data: bytes::Bytes,
    ) {
        let method = connect.properties.authentication_method.clone();
        let method = method.expect("invariant: an exchange has a method");
        connect.username = Some(username.clone());
        connect.password = None;
        connect.properties.authentication_data = Some(data);
        let authenticated = Authenticated {
            method,
            username,
            reauth: None,
        };
        self.auth
            .exchanges
            .authenticated
            .insert(conn, authenticated);
        self.admit(ctx, conn, connect, Box::default());
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
        let data = auth.properties.authentication_data.as_ref();
        let (round, rounds) = match (auth.reason_code, known.reauth.take()) {
            (ReasonCode::ReAuthenticate, None) => {
                (first_round(&self.shared, known.method.as_str(), data), 1)
            }
            (ReasonCode::ContinueAuthentication, Some((_, rounds))) if rounds >= MAX_ROUNDS => {
                debug!(rounds, "re-authentication refused: too many rounds");
                (Round::Refuse(ReasonCode::NotAuthorized), rounds)
            }
            (ReasonCode::ContinueAuthentication, Some((step, rounds))) => {
                (step.round(data), rounds + 1)
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

    /// Answers a re-authentication round.
    fn reauth_answered(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        (mut known, rounds): (Authenticated, u8),
        round: Round,
    ) {
        match round {
            Round::Continue(step, data) => {
                self.wire().send_auth(
                    ctx,
                    conn,
                    ReasonCode::ContinueAuthentication,
                    &known.method,
                    data,
                );
                known.reauth = Some((step, rounds));
                self.auth.exchanges.authenticated.insert(conn, known);
            }
            Round::Done { username, data } if username == known.username => {
                self.wire()
                    .send_auth(ctx, conn, ReasonCode::Success, &known.method, data);
                self.auth.exchanges.authenticated.insert(conn, known);
            }
            Round::Done { username, .. } => {
                debug!(%username, was = %known.username, "re-authentication as another user refused");
                self.reauth_failed(ctx, conn);
            }
            Round::Refuse(_) => self.reauth_failed(ctx, conn),
        }
    }

    /// A failed re-authentication: DISCONNECT 0x87 Not authorized.
    fn reauth_failed(&mut self, ctx: &mut Ctx, conn: ConnId) {
        debug!(?conn, "re-authentication failed: disconnecting");
        self.wire()
            .send_disconnect(ctx, conn, ReasonCode::NotAuthorized);
        self.wire().close_connection(ctx, conn);
    }
}

/// An AUTH before CONNACK must be 0x18 Continue authentication with the CONNECT's method.
fn check_continue(auth: &Auth, method: Option<&MqttStr>) -> Result<(), Fault> {
    if auth.reason_code != ReasonCode::ContinueAuthentication {
        return Err(Fault::protocol(format!(
            "AUTH {} during the CONNECT's exchange",
            auth.reason_code.name()
        )));
    }
    if auth.properties.authentication_method.as_ref() != method {
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
        data: bytes::Bytes,
    ) {
        let properties = AuthProperties {
            authentication_method: Some(method.clone()),
            authentication_data: Some(data),
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
