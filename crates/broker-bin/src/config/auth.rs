//! `[auth]`: anonymous access, the password file and the ACL file, validated; and the rule that a broker
//! reachable from other hosts never starts open by accident.

use std::path::PathBuf;

use super::error::ConfigError;
use super::fields::is_loopback;
use super::listeners::ListenerSettings;
use super::raw::RawAuth;
pub use access::settings::{AuthSettings, BackendKind, JwtConfig};

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
