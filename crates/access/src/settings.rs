//! `[auth]`'s typed settings: what the broker's config layer validates from TOML and hands to
//! this crate (the files, the backend chain and its workers). Parsing and key names stay in the
//! broker's config module; this is only the validated shape.

use std::path::PathBuf;

use crate::backend::http::HttpSettings;
use crate::backend::jwt::JwtSettings;
use crate::backend::redis::RedisSettings;
use crate::gatekeeper::GatekeeperSettings;
use crate::scram::Mechanism;

/// `[auth]`, validated.
#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// Clients that send no username are accepted (see [`Self::anonymous_allowed`]).
    pub allow_anonymous: bool,
    /// mosquitto_passwd format.
    pub password_file: Option<PathBuf>,
    /// mosquitto ACL format.
    pub acl_file: Option<PathBuf>,
    /// `backends`: who is asked about a login, in order.
    pub backends: Vec<BackendKind>,
    /// Workers, pending bound and caches for the external backends.
    pub gatekeeper: GatekeeperSettings,
    /// `[auth.http]`, when `backends` names `http`.
    pub http: Option<HttpSettings>,
    /// `[auth.redis]`, when `backends` names `redis`.
    pub redis: Option<RedisSettings>,
    /// `[auth.jwt]`, when `backends` names `jwt`.
    pub jwt: Option<JwtConfig>,
    /// `[auth.scram]`: MQTT 5 enhanced authentication with SCRAM, when configured.
    pub scram: Option<ScramSettings>,
    /// `client_id_owner_check`: a session belongs to the identity (username, or none) that
    /// created it; another identity's CONNECT with its client id is refused.
    pub client_id_owner_check: bool,
    /// `use_username_as_clientid`: a client's username replaces its client id (mosquitto's
    /// option); a client without a username is refused.
    pub use_username_as_clientid: bool,
}

impl AuthSettings {
    /// Whether any authentication is configured: a password file, or an external backend.
    pub fn authenticates(&self) -> bool {
        self.password_file.is_some()
            || self.scram.is_some()
            || self.backends.iter().any(|b| *b != BackendKind::File)
    }

    /// Whether an HTTP backend drives the AUTH exchange of Authentication Method `name`.
    pub fn http_drives(&self, name: &str) -> bool {
        let exchange = self.http.as_ref().and_then(|http| http.exchange.as_ref());
        exchange.is_some_and(|exchange| exchange.methods.iter().any(|m| m == name))
    }

    /// The SCRAM mechanism configured under the MQTT Authentication Method `name`, if any.
    pub fn scram_mechanism(&self, name: &str) -> Option<Mechanism> {
        let scram = self.scram.as_ref()?;
        scram.mechanisms.iter().copied().find(|m| m.name() == name)
    }

    /// Whether a CONNECT without a username is accepted: when `allow_anonymous` is set, or when
    /// nothing authenticates and every listener is on a loopback address (mosquitto 2's
    /// default: an out-of-the-box broker serves only its own host).
    pub fn anonymous_allowed(&self) -> bool {
        self.allow_anonymous || !self.authenticates()
    }
}

/// `[auth.scram]`, validated: where the credentials are kept and the mechanisms offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramSettings {
    /// Where the credentials are.
    pub store: ScramStore,
    /// The mechanisms accepted as Authentication Methods.
    pub mechanisms: Vec<Mechanism>,
}

impl ScramSettings {
    /// The credential file, when the credentials are kept in one.
    pub fn file(&self) -> Option<&PathBuf> {
        match &self.store {
            ScramStore::File(path) => Some(path),
            ScramStore::Redis => None,
        }
    }
}

/// Where SCRAM credentials are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScramStore {
    /// A credential file (`crate::scram::file`), read at start and on reload; asked on the
    /// reactor (a few HMACs).
    File(PathBuf),
    /// The Redis backend (`HGET <user>:scram <MECHANISM>`), asked on the auth workers.
    Redis,
}

/// One entry of `auth.backends`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// The password file.
    File,
    /// `[auth.http]`.
    Http,
    /// `[auth.redis]`.
    Redis,
    /// `[auth.jwt]`.
    Jwt,
}

/// `[auth.jwt]`, validated: the backend's settings without its keys, and the files they are
/// read from when the broker starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// Everything but the keys (left `None` here).
    pub settings: JwtSettings,
    /// A file holding the HS256 shared secret (its bytes, a trailing newline removed).
    pub hs256_secret_file: Option<PathBuf>,
    /// A PEM file with the RS256 public key.
    pub rs256_public_key_file: Option<PathBuf>,
    /// A PEM file with the ES256 (P-256) public key.
    pub es256_public_key_file: Option<PathBuf>,
}
