//! `[auth]`: anonymous access, the password file and the ACL file, validated; and the rule that a broker
//! reachable from other hosts never starts open by accident.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::error::ConfigError;
use super::listeners::ListenerSettings;
use super::raw::RawAuth;

/// `[auth]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthSettings {
    /// Clients that send no username are accepted (see [`Self::anonymous_allowed`]).
    pub allow_anonymous: bool,
    /// mosquitto_passwd format.
    pub password_file: Option<PathBuf>,
    /// mosquitto ACL format.
    pub acl_file: Option<PathBuf>,
}

impl AuthSettings {
    /// Whether any authentication is configured.
    pub fn authenticates(&self) -> bool {
        self.password_file.is_some()
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
        let settings = AuthSettings {
            allow_anonymous: self.allow_anonymous.unwrap_or(false),
            password_file: path(&self.password_file),
            acl_file: path(&self.acl_file),
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

fn is_loopback(addr: &SocketAddr) -> bool {
    match addr {
        SocketAddr::V4(v4) => v4.ip().is_loopback(),
        SocketAddr::V6(v6) => {
            v6.ip().is_loopback() || v6.ip().to_ipv4_mapped().is_some_and(|ip| ip.is_loopback())
        }
    }
}
