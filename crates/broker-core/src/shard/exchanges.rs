//! [`Exchanges`]: the AUTH exchanges (MQTT 5.0 section 4.12) of this shard's connections, and
//! one round of a method ([`first_round`], [`Step::round`], [`Step::answered`]);
//! `auth_exchange.rs` drives them from the packets and the workers' answers.
//!
//! SCRAM with a credential file runs here (a few HMACs). A SCRAM credential kept in Redis, and
//! every round of a method an HTTP backend drives, go to the auth workers: the step waits
//! ([`Step::Waiting`]) for the answer, which the worker hands back with the job's token.
//! Each entry is small and bounded: a method's state between two rounds (for SCRAM, the two
//! first messages and the user's stored keys, no longer than the AUTH or CONNECT they came in
//! under `limits.max_connect_size`), and a round counter capped at [`MAX_ROUNDS`].

use access::backend::{ExchangeAnswer, ExchangeRound, Grant};
use access::gatekeeper::exchange::{ExchangeOutcome, ExchangeWork};
use access::gatekeeper::grant::ClientGrant;
use access::gatekeeper::workers::{Job, NO_PEER};
use access::scram::{Mechanism, ScramError, ScramServer};
use access::settings::ScramStore;
use bytes::Bytes;
use codec::{Connect, MqttStr, ReasonCode};
use ring_runtime::{ConnId, ShardId};
use session_store::ByteBudget;
use tracing::debug;

use super::Ctx;
use super::logins::connect_bytes;
use crate::shared::Shared;

/// The most AUTH packets a client may send in one exchange (a SCRAM exchange needs one).
pub(super) const MAX_ROUNDS: u8 = 10;

/// A method's state between two rounds.
pub(super) enum Step {
    /// SCRAM: server-first sent, client-final expected; the grant of the backend that keeps
    /// the credential (Redis), for the client's ACL once it succeeds.
    Scram(Box<ScramServer>, Option<Box<ClientGrant>>),
    /// A method backend link `link` drives: its next round's number and the state it asked
    /// to get back.
    Backend {
        link: usize,
        round: u8,
        state: Option<String>,
    },
    /// A worker is asked (job `token`); `link` and `round` of a backend-driven method.
    Waiting {
        token: u64,
        backend: Option<(usize, u8)>,
    },
}

/// What one round of an exchange ends with.
pub(super) enum Round {
    /// Another AUTH 0x18 Continue authentication with this data; the exchange waits.
    Continue(Step, Bytes),
    /// A worker answers later; the exchange waits in this step.
    Wait(Step),
    /// Authenticated (as `username`, else as the CONNECT's user); the final data, if any,
    /// goes in the CONNACK or AUTH 0x00.
    Done {
        username: Option<MqttStr>,
        data: Option<Bytes>,
        grant: Option<Box<ClientGrant>>,
    },
    /// Refused with this reason (0x87 Not authorized, 0x88/0x89 for backends, 0x82 for a
    /// client out of turn); the log says why.
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
    pub(super) username: Option<MqttStr>,
    /// A re-authentication in progress, and its rounds.
    pub(super) reauth: Option<(Step, u8)>,
}

/// The shard's AUTH exchanges.
#[derive(Default)]
pub(super) struct Exchanges {
    /// CONNECTs whose client has not logged in yet, each with the bytes it is charged.
    connecting: super::FastMap<ConnId, (ConnectExchange, u64)>,
    pub(super) authenticated: super::FastMap<ConnId, Authenticated>,
    next_token: u64,
}

/// What a held exchange is charged beyond its CONNECT: the method's state between rounds (for
/// SCRAM, the first two messages, shorter than the CONNECT and AUTH they came in).
const STEP_CHARGE: u64 = 1024;

impl Exchanges {
    /// Holds `exchange` until its client's next AUTH (or a worker's answer), charging its
    /// CONNECT to `budget`, the bytes clients that have not logged in may make the broker hold
    /// (`limits.max_partial_frame_bytes`, shared with partial packets). `Err` gives it back
    /// when the budget cannot take it.
    pub(super) fn hold(
        &mut self,
        conn: ConnId,
        exchange: ConnectExchange,
        budget: &ByteBudget,
    ) -> Result<(), Box<ConnectExchange>> {
        let bytes = connect_bytes(&exchange.connect) + STEP_CHARGE;
        if !budget.try_charge(bytes) {
            return Err(Box::new(exchange));
        }
        if let Some((_, replaced)) = self.connecting.insert(conn, (exchange, bytes)) {
            budget.release(replaced);
        }
        Ok(())
    }

    /// Takes `conn`'s held exchange out, its charge released.
    pub(super) fn take(&mut self, conn: ConnId, budget: &ByteBudget) -> Option<ConnectExchange> {
        let (exchange, bytes) = self.connecting.remove(&conn)?;
        budget.release(bytes);
        Some(exchange)
    }

    /// Whether `conn`'s held exchange waits for the worker job `token`.
    pub(super) fn connect_waits_for(&self, conn: ConnId, token: u64) -> bool {
        (self.connecting.get(&conn)).is_some_and(|(e, _)| e.step.waits_for() == Some(token))
    }

    /// The connection ended: its exchange, if any, is forgotten (a late answer is ignored).
    pub(super) fn exchange_closed(&mut self, conn: ConnId, budget: &ByteBudget) {
        self.take(conn, budget);
        self.authenticated.remove(&conn);
    }

    /// A fresh job token.
    pub(super) fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }
}

/// Who asks, for the rounds that go to a worker.
pub(super) struct Asker<'a> {
    pub(super) shared: &'a Shared,
    pub(super) shard: ShardId,
    pub(super) conn: ConnId,
    pub(super) token: u64,
    pub(super) client_id: &'a str,
    pub(super) username: Option<&'a str>,
    pub(super) peer: std::net::SocketAddr,
    pub(super) reauthenticating: bool,
}

impl<'a> Asker<'a> {
    /// Who asks for the rounds of `connect`'s exchange (job `token` of `conn`).
    pub(super) fn connecting(
        shared: &'a Shared,
        shard: ShardId,
        ctx: &Ctx,
        job: (ConnId, u64),
        connect: &'a Connect,
    ) -> Self {
        let username = connect.username.as_ref().map(|u| u.as_str());
        let who = (connect.client_id.as_str(), username);
        Self::new((shared, shard), ctx, job, who, false)
    }

    /// Who asks for a connected client's re-authentication (`client_id` from its session).
    pub(super) fn reauthenticating(
        shared: &'a Shared,
        shard: ShardId,
        ctx: &Ctx,
        job: (ConnId, u64),
        client_id: &'a str,
    ) -> Self {
        Self::new((shared, shard), ctx, job, (client_id, None), true)
    }

    fn new(
        (shared, shard): (&'a Shared, ShardId),
        ctx: &Ctx,
        (conn, token): (ConnId, u64),
        (client_id, username): (&'a str, Option<&'a str>),
        reauthenticating: bool,
    ) -> Self {
        Self {
            shared,
            shard,
            conn,
            token,
            client_id,
            username,
            peer: ctx.peer_addr(conn).unwrap_or(NO_PEER),
            reauthenticating,
        }
    }
}

/// Whether `method` is an Authentication Method this broker is configured for.
pub(super) fn offers_method(shared: &Shared, method: &str) -> bool {
    let auth = &shared.config.auth;
    auth.scram_mechanism(method).is_some() || auth.http_drives(method)
}

/// The first round: the method named `method` takes the client's first data.
pub(super) fn first_round(asker: &Asker<'_>, method: &str, data: Option<&Bytes>) -> Round {
    let auth = &asker.shared.config.auth;
    if let Some(mechanism) = auth.scram_mechanism(method) {
        let Some(client_first) = data else {
            debug!(
                method,
                "AUTH exchange refused: SCRAM needs client-first as Authentication Data"
            );
            return Round::Refuse(ReasonCode::NotAuthorized);
        };
        return scram_first(asker, mechanism, client_first);
    }
    let driver = asker.shared.access.gatekeeper.as_ref();
    match driver.and_then(|g| g.chain().driver_of(method)) {
        Some(link) => ask_backend(asker, method, data, (link, 0, None)),
        None => Round::Refuse(ReasonCode::BadAuthenticationMethod),
    }
}

fn scram_first(asker: &Asker<'_>, mechanism: Mechanism, client_first: &Bytes) -> Round {
    let store = asker.shared.config.auth.scram.as_ref().map(|s| &s.store);
    if store == Some(&ScramStore::Redis) {
        let work = ExchangeWork::ScramFirst {
            mechanism,
            client_first: client_first.to_vec(),
            client_id: asker.client_id.to_owned(),
        };
        return submit(asker, work, None);
    }
    let Some(file) = asker.shared.access.scram() else {
        return Round::Refuse(ReasonCode::BadAuthenticationMethod);
    };
    let lookup = |user: &str| file.credential(user, mechanism).cloned();
    let started = ScramServer::start(mechanism, client_first, lookup);
    scram_started(started.map(|(s, f)| (Box::new(s), f)), None)
}

fn scram_started(
    started: Result<(Box<ScramServer>, Vec<u8>), ScramError>,
    grant: Option<Box<ClientGrant>>,
) -> Round {
    match started {
        Ok((server, first)) => Round::Continue(Step::Scram(server, grant), first.into()),
        Err(error) => refuse(None, &error),
    }
}

/// A round of a backend-driven method, for the workers.
fn ask_backend(
    asker: &Asker<'_>,
    method: &str,
    data: Option<&Bytes>,
    (link, round, state): (usize, u8, Option<String>),
) -> Round {
    let round = ExchangeRound {
        method: method.to_owned(),
        client_id: asker.client_id.to_owned(),
        username: asker.username.map(str::to_owned),
        data: data.map(|d| d.to_vec()),
        round,
        state,
        reauthenticating: asker.reauthenticating,
        peer: asker.peer,
    };
    let backend = Some((link, round.round));
    submit(asker, ExchangeWork::Round { link, round }, backend)
}

fn submit(asker: &Asker<'_>, work: ExchangeWork, backend: Option<(usize, u8)>) -> Round {
    let Some(gatekeeper) = &asker.shared.access.gatekeeper else {
        return Round::Refuse(ReasonCode::BadAuthenticationMethod);
    };
    let job = Job::Exchange {
        shard: asker.shard,
        conn: asker.conn,
        token: asker.token,
        work,
    };
    if gatekeeper.submit(job).is_err() {
        debug!("AUTH exchange refused: auth.max_pending jobs wait for the backends already");
        return Round::Refuse(ReasonCode::ServerBusy);
    }
    Round::Wait(Step::Waiting {
        token: asker.token,
        backend,
    })
}

impl Step {
    /// A later round: the client's AUTH 0x18 data for `method`.
    pub(super) fn round(self, asker: &Asker<'_>, method: &str, data: Option<&Bytes>) -> Round {
        match self {
            Self::Scram(server, grant) => scram_final(*server, grant, data),
            Self::Backend { link, round, state } => {
                ask_backend(asker, method, data, (link, round, state))
            }
            Self::Waiting { .. } => {
                debug!("AUTH refused: the client answered before the server's AUTH");
                Round::Refuse(ReasonCode::ProtocolError)
            }
        }
    }

    /// The job token this step waits for, if it waits.
    pub(super) fn waits_for(&self) -> Option<u64> {
        match self {
            Self::Waiting { token, .. } => Some(*token),
            _ => None,
        }
    }

    /// A worker's answer to the job this step waits for.
    pub(super) fn answered(self, shared: &Shared, outcome: ExchangeOutcome) -> Round {
        let backend = match self {
            Self::Waiting { backend, .. } => backend,
            _ => None,
        };
        match outcome {
            ExchangeOutcome::ScramStarted { started, grant } => {
                match grant.map(|(grant, link)| client_grant(shared, grant, link)) {
                    Some(Err(round)) => round,
                    Some(Ok(grant)) => scram_started(started, Some(grant)),
                    None => scram_started(started, None),
                }
            }
            ExchangeOutcome::Answered(answer) => backend_answered(backend, answer),
            ExchangeOutcome::Unavailable(error) => {
                debug!(%error, "AUTH exchange refused: a backend is unavailable");
                Round::Refuse(ReasonCode::ServerUnavailable)
            }
        }
    }
}

fn backend_answered(backend: Option<(usize, u8)>, answer: ExchangeAnswer) -> Round {
    match (answer, backend) {
        (ExchangeAnswer::Continue { data, state }, Some((link, round))) => {
            let next = Step::Backend {
                link,
                round: round.saturating_add(1),
                state,
            };
            Round::Continue(next, data.into())
        }
        (ExchangeAnswer::Success { data, username }, _) => {
            let username = username.map(MqttStr::try_from);
            match username.transpose() {
                Ok(username) => Round::Done {
                    username,
                    data: data.map(Bytes::from),
                    grant: None,
                },
                Err(_) => refuse(None, &ScramError::NotUtf8),
            }
        }
        _ => {
            debug!("AUTH exchange refused by the backend");
            Round::Refuse(ReasonCode::NotAuthorized)
        }
    }
}

/// The ACL grant of the backend `link` that keeps a SCRAM user's credential.
fn client_grant(shared: &Shared, grant: Grant, link: usize) -> Result<Box<ClientGrant>, Round> {
    let checks_topics = shared.access.link_checks_topics(link);
    match ClientGrant::from_backend(grant, link, checks_topics) {
        Ok(grant) => Ok(Box::new(grant)),
        Err(problem) => {
            tracing::warn!(%problem, "AUTH exchange refused: the backend's topic rules are invalid");
            Err(Round::Refuse(ReasonCode::NotAuthorized))
        }
    }
}

fn scram_final(
    server: ScramServer,
    grant: Option<Box<ClientGrant>>,
    data: Option<&Bytes>,
) -> Round {
    let user = server.username().to_owned();
    match server.finish(data.map_or(&[][..], |d| &d[..])) {
        Ok(success) => match MqttStr::try_from(success.username) {
            Ok(username) => Round::Done {
                username: Some(username),
                data: Some(success.server_final.into()),
                grant,
            },
            Err(_) => refuse(Some(&user), &ScramError::NotUtf8),
        },
        Err(error) => refuse(Some(&user), &error),
    }
}

fn refuse(user: Option<&str>, error: &ScramError) -> Round {
    debug!(user = user.unwrap_or(""), %error, "AUTH exchange refused");
    Round::Refuse(ReasonCode::NotAuthorized)
}
