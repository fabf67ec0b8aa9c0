//! `[auth]`: anonymous access, the password file and the ACL file, `[auth.scram]` (MQTT 5
//! enhanced authentication), the worker and cache keys,
//! raw and validated (the backends' tables are in `auth_backends.rs`); and the rule that a
//! broker reachable from other hosts never starts open by accident.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::auth_backends::{
    RawAuthHttp, RawAuthJwt, RawAuthRedis, RawAuthScram, backend_kinds, http_settings, jwt_config,
    redis_settings, scram_settings,
};
use super::error::ConfigError;
use super::fields::{is_loopback, ranged};
use super::listeners::ListenerSettings;
use super::overlay::{overlay_table, set_if_some};
use access::gatekeeper::GatekeeperSettings;
pub use access::settings::{AuthSettings, BackendKind, JwtConfig};

/// `[auth]`, with its backends' tables (`[auth.http]`, `[auth.redis]`, `[auth.jwt]`), each
/// overlaid key by key.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuth {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_anonymous: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acl_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id_owner_check: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_username_as_clientid: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backends: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pending: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_entries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_ttl: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<RawAuthHttp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<RawAuthRedis>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jwt: Option<RawAuthJwt>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scram: Option<RawAuthScram>,
}

impl RawAuth {
    /// Takes every field that `over` sets; backend tables are overlaid key by key.
    pub fn overlay(&mut self, over: Self) {
        set_if_some(&mut self.allow_anonymous, over.allow_anonymous);
        set_if_some(&mut self.password_file, over.password_file);
        set_if_some(&mut self.acl_file, over.acl_file);
        set_if_some(&mut self.client_id_owner_check, over.client_id_owner_check);
        set_if_some(
            &mut self.use_username_as_clientid,
            over.use_username_as_clientid,
        );
        set_if_some(&mut self.backends, over.backends);
        set_if_some(&mut self.workers, over.workers);
        set_if_some(&mut self.max_pending, over.max_pending);
        set_if_some(&mut self.cache_entries, over.cache_entries);
        set_if_some(&mut self.cache_ttl, over.cache_ttl);
        overlay_table(&mut self.http, over.http, RawAuthHttp::overlay);
        overlay_table(&mut self.redis, over.redis, RawAuthRedis::overlay);
        overlay_table(&mut self.jwt, over.jwt, RawAuthJwt::overlay);
        overlay_table(&mut self.scram, over.scram, RawAuthScram::overlay);
    }

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
        let backends = backend_kinds(&self.backends)?;
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
            http: http_settings(&backends, &self.http)?,
            redis: redis_settings(&backends, &self.redis)?,
            jwt: jwt_config(&backends, &self.jwt)?,
            scram: scram_settings(&backends, &self.scram)?,
            backends,
            client_id_owner_check: self.client_id_owner_check.unwrap_or(true),
            use_username_as_clientid: self.use_username_as_clientid.unwrap_or(false),
        };
        let quic = listeners.quic.iter().map(|q| q.bind);
        let open = (listeners.binds().into_iter().chain(quic)).find(|a| !is_loopback(a));
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

    /// `auth.workers`, `max_pending`, `cache_entries` and `cache_ttl`.
    fn gatekeeper_settings(&self) -> Result<GatekeeperSettings, ConfigError> {
        Ok(GatekeeperSettings {
            workers: ranged("auth.workers", self.workers.unwrap_or(4), 1, 256)? as usize,
            max_pending: ranged(
                "auth.max_pending",
                self.max_pending.unwrap_or(16_384),
                1,
                1 << 20,
            )? as usize,
            cache_entries: ranged(
                "auth.cache_entries",
                self.cache_entries.unwrap_or(100_000),
                0,
                100_000_000,
            )? as usize,
            cache_ttl: Duration::from_secs(ranged(
                "auth.cache_ttl",
                self.cache_ttl.unwrap_or(60),
                0,
                86_400,
            )?),
        })
    }
}
