//! `[auth]`: anonymous access, the password file and the ACL file, validated; and the rule that a broker
//! reachable from other hosts never starts open by accident.

use std::net::SocketAddr;
use std::path::PathBuf;

pub use super::auth_backends::{BackendKind, JwtConfig};
use super::error::ConfigError;
use super::listeners::ListenerSettings;
use super::raw::RawAuth;
use crate::access::backend::http::HttpSettings;
use crate::access::backend::redis::RedisSettings;
use crate::gatekeeper::GatekeeperSettings;

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
}

impl AuthSettings {
    /// Whether any authentication is configured: a password file, or an external backend.
    pub fn authenticates(&self) -> bool {
        self.password_file.is_some() || self.backends.iter().any(|b| *b != BackendKind::File)
    }

    /// Whether a CONNECT without a username is accepted: when `allow_anonymous` is set, or when
    /// nothing authenticates and every listener is on a loopback address (mosquitto 2's
    /// default: an out-of-the-box broker serves only its own host).
    pub fn anonymous_allowed(&self) -> bool {
        self.allow_anonymous || !self.authenticates()
    }
}

impl RawAuth {
    pub(super) fn validate(
        &self,
        listeners: &ListenerSettings,
    ) -> Result<AuthSettings, ConfigError> {
        let path = |value: &Option<String>| {
            value
                .as_deref()
                .filter(|text| !text.is_empty())
                .map(PathBuf::from)
        };
        let backends = self.backend_kinds()?;
        let password_file = path(&self.password_file);
        if password_file.is_some() && !backends.contains(&BackendKind::File) {
            return Err(ConfigError::invalid(
                "auth.backends",
                "auth.password_file is set but `file` is not among the backends: add \"file\" \
                 or remove the password file",
            ));
        }
        let settings = AuthSettings {
            allow_anonymous: self.allow_anonymous.unwrap_or(false),
            password_file,
            acl_file: path(&self.acl_file),
            gatekeeper: self.gatekeeper_settings()?,
            http: self.http_settings(&backends)?,
            redis: self.redis_settings(&backends)?,
            jwt: self.jwt_config(&backends)?,
            backends,
        };
        let open = listeners.binds().into_iter().find(|a| !is_loopback(a));
        if let Some(open) = open
            && !settings.authenticates()
            && !settings.allow_anonymous
        {
            return Err(ConfigError::invalid(
                "auth.allow_anonymous",
                format!(
                    "listener {open} is reachable from other hosts and no authentication is \
                     configured: set auth.password_file, or set auth.allow_anonymous = true to \
                     let anyone connect"
                ),
            ));
        }
        Ok(settings)
    }
}

/// Whether `addr` is reachable only from this host.
pub(super) fn is_loopback(addr: &SocketAddr) -> bool {
    match addr {
        SocketAddr::V4(v4) => v4.ip().is_loopback(),
        SocketAddr::V6(v6) => {
            v6.ip().is_loopback() || v6.ip().to_ipv4_mapped().is_some_and(|ip| ip.is_loopback())
        }
    }
}
