//! [`Exchanges`]: the AUTH exchanges (MQTT 5.0 section 4.12) of this shard's connections, and
//! one round of a method ([`Step::round`]); `auth_exchange.rs` drives them from the packets.
//!
//! Each entry is small and bounded: a method's state between two rounds (for SCRAM, the two
//! first messages and the user's stored keys, at most `limits.max_connect_size` long as they
//! came in an AUTH or CONNECT), and a round counter capped at [`MAX_ROUNDS`].

use access::scram::{Mechanism, ScramError, ScramServer};
use bytes::Bytes;
use codec::{Connect, MqttStr, ReasonCode};
use ring_runtime::ConnId;
use tracing::debug;

use crate::shared::Shared;

/// The most AUTH packets a client may send in one exchange (a SCRAM exchange needs one).
pub(super) const MAX_ROUNDS: u8 = 10;

/// A method's state between two rounds.
pub(super) enum Step {
    /// SCRAM: server-first sent, client-final expected.
    Scram(Box<ScramServer>),
}

/// What one round of an exchange ends with.
pub(super) enum Round {
    /// Another AUTH 0x18 Continue authentication with this data; the exchange waits.
    Continue(Step, Bytes),
    /// Authenticated as `username`; the final data goes in the CONNACK or AUTH 0x00.
    Done { username: MqttStr, data: Bytes },
    /// Refused with this reason (0x87 Not authorized); the log says why.
    Refuse(ReasonCode),
}

/// A CONNECT whose AUTH exchange runs.
pub(super) struct ConnectExchange {
    pub(super) connect: Connect,
    pub(super) step: Step,
    pub(super) rounds: u8,
}

/// A connected client that authenticated with a method (it may re-authenticate with it).
pub(super) struct Authenticated {
    pub(super) method: MqttStr,
    /// The user the method authenticated: a re-authentication must name the same.
    pub(super) username: MqttStr,
    /// A re-authentication in progress, and its rounds.
    pub(super) reauth: Option<(Step, u8)>,
}

/// The shard's AUTH exchanges.
#[derive(Default)]
pub(super) struct Exchanges {
    pub(super) connecting: super::FastMap<ConnId, ConnectExchange>,
    pub(super) authenticated: super::FastMap<ConnId, Authenticated>,
}

impl Exchanges {
    /// The connection ended: its exchange, if any, is forgotten.
    pub(super) fn exchange_closed(&mut self, conn: ConnId) {
        self.connecting.remove(&conn);
        self.authenticated.remove(&conn);
    }
}

/// Whether `method` is an Authentication Method this broker is configured for.
pub(super) fn offers_method(shared: &Shared, method: &str) -> bool {
    shared.config.auth.scram_mechanism(method).is_some()
}

/// The first round: the method named `method` takes the client's first data.
pub(super) fn first_round(shared: &Shared, method: &str, data: Option<&Bytes>) -> Round {
    let Some(mechanism) = shared.config.auth.scram_mechanism(method) else {
        return Round::Refuse(ReasonCode::BadAuthenticationMethod);
    };
    let Some(client_first) = data else {
        debug!(
            method,
            "AUTH exchange refused: SCRAM needs client-first as Authentication Data"
        );
        return Round::Refuse(ReasonCode::NotAuthorized);
    };
    scram_first(shared, mechanism, client_first)
}

fn scram_first(shared: &Shared, mechanism: Mechanism, client_first: &[u8]) -> Round {
    let Some(file) = shared.access.scram() else {
        return Round::Refuse(ReasonCode::BadAuthenticationMethod);
    };
    let lookup = |user: &str| file.credential(user, mechanism).cloned();
    match ScramServer::start(mechanism, client_first, lookup) {
        Ok((server, server_first)) => {
            Round::Continue(Step::Scram(Box::new(server)), server_first.into())
        }
        Err(error) => refuse(mechanism.name(), None, &error),
    }
}

impl Step {
    /// A later round: the client's AUTH 0x18 data.
    pub(super) fn round(self, data: Option<&Bytes>) -> Round {
        match self {
            Self::Scram(server) => {
                let user = server.username().to_owned();
                let method = server.mechanism().name();
                match server.finish(data.map_or(&[][..], |d| &d[..])) {
                    Ok(success) => match MqttStr::try_from(success.username) {
                        Ok(username) => Round::Done {
                            username,
                            data: success.server_final.into(),
                        },
                        Err(_) => refuse(method, Some(&user), &ScramError::NotUtf8),
                    },
                    Err(error) => refuse(method, Some(&user), &error),
                }
            }
        }
    }
}

fn refuse(method: &str, user: Option<&str>, error: &ScramError) -> Round {
    debug!(
        method,
        user = user.unwrap_or(""),
        %error,
        "AUTH exchange refused"
    );
    Round::Refuse(ReasonCode::NotAuthorized)
}
