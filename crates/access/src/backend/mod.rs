//! External authentication and authorization backends (`auth.backends`): HTTP, Redis and JWT.
//!
//! Each backend answers one question at a time and may block on the network: the broker asks
//! them on its auth worker threads (`crate::gatekeeper`), never on a reactor, and caches the
//! answers. A backend only answers; the chain order, caching and what a refusal means to the
//! client are decided by the caller.

pub mod exchange;
pub mod http;
pub mod jwt;
mod password_hash;
pub mod redis;
mod rules;
mod setup;
mod slots;

pub use exchange::{ExchangeAnswer, ExchangeRound};
pub use password_hash::SaltEncoding;
pub use setup::SetupError;

use std::net::SocketAddr;
use std::time::SystemTime;

/// A CONNECT to judge.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LoginRequest {
    /// The client identifier (assigned by the broker when the client sent an empty one).
    pub client_id: String,
    /// The CONNECT username, if any.
    pub username: Option<String>,
    /// The CONNECT password, if any (binary in MQTT).
    pub password: Option<Vec<u8>>,
    /// The client's address.
    pub peer: SocketAddr,
}

/// A topic access to judge for a connected client.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclRequest {
    /// The client identifier.
    pub client_id: String,
    /// The CONNECT username, if any.
    pub username: Option<String>,
    /// The client's address.
    pub peer: SocketAddr,
    /// The topic (publish, receive) or topic filter (subscribe).
    pub topic: String,
    /// What the client wants to do with it.
    pub access: TopicAccess,
}

/// What a client wants to do with a topic, as external backends distinguish it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TopicAccess {
    /// Subscribe to a topic filter (mosquitto-go-auth's HTTP `acc` 4).
    Subscribe,
    /// Receive a message published to a topic (`acc` 1).
    Receive,
    /// Publish to a topic (`acc` 2).
    Publish,
}

/// A backend's answer to a CONNECT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginAnswer {
    /// The credentials are good.
    Allow(Grant),
    /// The backend knows this user and refuses (bad password, bad token, expired token).
    Deny,
    /// The backend has no opinion (unknown user, no token): the next backend is asked.
    Unknown,
}

/// What an accepted login carries besides the acceptance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    /// When the credentials stop being valid (a JWT's `exp`): the broker disconnects the
    /// client then (5.0: 0xA0 Maximum connect time).
    pub expires_at: Option<SystemTime>,
    /// This client's whole ACL when the backend hands it over at login (Redis sets, JWT
    /// claims); `None` when topic checks are asked one at a time (HTTP).
    pub rules: Option<Vec<TopicRule>>,
    /// A superuser: every topic check is allowed.
    pub superuser: bool,
}

/// One topic rule of a [`Grant`]: `filter` may be used for `access`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRule {
    /// An MQTT topic filter (`+` and `#` allowed), already checked to be valid.
    pub filter: String,
    /// What the rule allows.
    pub access: RuleAccess,
}

/// What a [`TopicRule`] allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAccess {
    /// Subscribe to it and receive messages published to it.
    Read,
    /// Publish to it.
    Write,
    /// Both.
    ReadWrite,
}

/// A backend's answer to a topic check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclAnswer {
    /// Allowed.
    Allow,
    /// Refused.
    Deny,
    /// No opinion: the next backend is asked.
    Unknown,
}

/// Why a backend could not answer (the broker treats it as "not allowed" and says why).
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The backend did not answer within its timeout.
    #[error("{backend}: no answer within {timeout_ms} ms")]
    Timeout {
        /// Which backend.
        backend: &'static str,
        /// The configured timeout.
        timeout_ms: u64,
    },
    /// The backend could not be reached or the connection broke.
    #[error("{backend}: {detail}")]
    Unavailable {
        /// Which backend.
        backend: &'static str,
        /// What went wrong (address and cause).
        detail: String,
    },
    /// The backend answered something this broker cannot read.
    #[error("{backend}: unexpected answer: {detail}")]
    BadAnswer {
        /// Which backend.
        backend: &'static str,
        /// What was wrong with the answer.
        detail: String,
    },
}

/// An external authentication and authorization backend.
pub trait Backend: Send + Sync {
    /// Its name in `auth.backends` (`"http"`, `"redis"`, `"jwt"`).
    fn name(&self) -> &'static str;

    /// Judges a CONNECT. May block (bounded by the backend's timeout).
    fn login(&self, request: &LoginRequest) -> Result<LoginAnswer, BackendError>;

    /// Judges a topic access for a client this backend let in without handing over its rules
    /// ([`Grant::rules`] `None`). May block (bounded by the backend's timeout).
    fn check_acl(&self, request: &AclRequest) -> Result<AclAnswer, BackendError>;

    /// Whether [`Self::check_acl`] has anything to say for clients this backend let in
    /// without rules (HTTP with an ACL URL); `false`: such clients are not restricted by it.
    fn checks_topics(&self) -> bool {
        false
    }

    /// The grant this backend would hand `username` (connected as `client_id`) now, read
    /// again without its credentials, for a backend whose grants can change behind a
    /// connected client (Redis: its ACL sets and superuser flag). `None`: nothing to read
    /// again (JWT claims are in the client's token; HTTP answers topic by topic).
    /// May block (bounded by the backend's timeout).
    fn current_grant(
        &self,
        _client_id: &str,
        _username: Option<&str>,
    ) -> Result<Option<Grant>, BackendError> {
        Ok(None)
    }

    /// The SCRAM credential of `username` for `mechanism`, where this backend stores them
    /// (Redis); `Ok(None)`: not here. May block (bounded by the backend's timeout).
    fn scram_credential(
        &self,
        _username: &str,
        _mechanism: crate::scram::Mechanism,
    ) -> Result<Option<crate::scram::ScramCredential>, BackendError> {
        Ok(None)
    }

    /// Whether this backend drives the AUTH exchange of Authentication Method `method`.
    fn drives_method(&self, _method: &str) -> bool {
        false
    }

    /// One round of an exchange this backend drives ([`Self::drives_method`]). May block
    /// (bounded by the backend's timeout).
    fn exchange_round(&self, _round: &ExchangeRound) -> Result<ExchangeAnswer, BackendError> {
        Ok(ExchangeAnswer::Deny)
    }
}
