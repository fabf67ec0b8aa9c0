//! `[http]`: the operations HTTP listener (`/metrics`, `/healthz`, `/readyz`, `/api/`),
//! validated; like `[auth]`, a listener reachable from other hosts never starts open.

use std::path::PathBuf;
use std::time::Duration;

use broker_api::Secret;
pub use ops::settings::{AllowedHosts, BasicCredentials, HostName, HttpSettings};

use super::error::ConfigError;
use super::fields::{is_loopback, parse_listen_addr};
use super::overlay::raw_section;

raw_section!(
    /// `[http]`
    RawHttp {
        bind: String,
        token: String,
        username: String,
        password: String,
        tls_cert_file: String,
        tls_key_file: String,
        max_connections: u64,
        max_head_bytes: u64,
        max_body_bytes: u64,
        read_timeout_ms: u64,
        header_timeout_ms: u64,
        allowed_hosts: Vec<String>,
        history_interval_ms: u64,
    }
);

/// A string key's value; empty means unset.
fn text(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|text| !text.is_empty())
}

/// A required integer in `min..=max`, as `usize`.
fn bounded(key: &'static str, value: Option<u64>, min: u64, max: u64) -> Result<u64, ConfigError> {
    let value = value.ok_or_else(|| ConfigError::invalid(key, "missing (and no default)"))?;
    if !(min..=max).contains(&value) {
        return Err(ConfigError::invalid(
            key,
            format!("{value} is out of range {min}..={max}"),
        ));
    }
    Ok(value)
}

impl RawHttp {
    pub(super) fn validate(&self) -> Result<HttpSettings, ConfigError> {
        let bind = text(&self.bind)
            .map(|addr| parse_listen_addr("http.bind", addr))
            .transpose()?;
        let settings = HttpSettings {
            bind,
            token: text(&self.token).map(|t| Secret(t.to_owned())),
            basic: self.basic()?,
            tls: self.tls()?,
            max_connections: bounded("http.max_connections", self.max_connections, 1, 1024)?
                as usize,
            max_head_bytes: bounded("http.max_head_bytes", self.max_head_bytes, 1024, 1 << 20)?
                as usize,
            max_body_bytes: bounded("http.max_body_bytes", self.max_body_bytes, 0, 64 << 20)?
                as usize,
            read_timeout: Duration::from_millis(bounded(
                "http.read_timeout_ms",
                self.read_timeout_ms,
                100,
                600_000,
            )?),
            header_timeout: Duration::from_millis(bounded(
                "http.header_timeout_ms",
                self.header_timeout_ms,
                100,
                600_000,
            )?),
            allowed_hosts: self.allowed_hosts()?,
            history_interval: Duration::from_millis(bounded(
                "http.history_interval_ms",
                self.history_interval_ms,
                100,
                60_000,
            )?),
        };
        if let Some(addr) = settings.bind
            && !is_loopback(&addr)
            && !settings.requires_credentials()
        {
            return Err(ConfigError::invalid(
                "http.token",
                format!(
                    "the operations listener {addr} is reachable from other hosts and has no \
                     credentials: set http.token, or http.username and http.password (or bind \
                     it to a loopback address)"
                ),
            ));
        }
        Ok(settings)
    }

    fn basic(&self) -> Result<Option<BasicCredentials>, ConfigError> {
        let pair = both(
            ("http.username", &self.username),
            ("http.password", &self.password),
        )?;
        let Some((username, password)) = pair else {
            return Ok(None);
        };
        if username.contains(':') {
            return Err(ConfigError::invalid(
                "http.username",
                "must not contain ':' (HTTP basic authentication splits on it)",
            ));
        }
        Ok(Some(BasicCredentials {
            username: username.to_owned(),
            password: Secret(password.to_owned()),
        }))
    }

    fn allowed_hosts(&self) -> Result<AllowedHosts, ConfigError> {
        let mut allowed = AllowedHosts::default();
        for entry in self.allowed_hosts.iter().flatten() {
            if entry == "*" {
                allowed.any = true;
                continue;
            }
            let host = HostName::parse(entry).ok_or_else(|| {
                ConfigError::invalid(
                    "http.allowed_hosts",
                    format!(
                        "`{entry}` is not a host name or IP address (give neither a scheme nor \
                         a port; an IPv6 address may be in brackets)"
                    ),
                )
            })?;
            allowed.hosts.push(host);
        }
        Ok(allowed)
    }

    fn tls(&self) -> Result<Option<(PathBuf, PathBuf)>, ConfigError> {
        let pair = both(
            ("http.tls_cert_file", &self.tls_cert_file),
            ("http.tls_key_file", &self.tls_key_file),
        )?;
        Ok(pair.map(|(cert, key)| (cert.into(), key.into())))
    }
}

/// Two keys that go together: both set, or neither; the error names the one missing.
fn both<'a>(
    (a_key, a): (&'static str, &'a Option<String>),
    (b_key, b): (&'static str, &'a Option<String>),
) -> Result<Option<(&'a str, &'a str)>, ConfigError> {
    match (text(a), text(b)) {
        (None, None) => Ok(None),
        (Some(a), Some(b)) => Ok(Some((a, b))),
        (Some(_), None) => Err(ConfigError::invalid(
            b_key,
            format!("{a_key} is set without it"),
        )),
        (None, Some(_)) => Err(ConfigError::invalid(
            a_key,
            format!("{b_key} is set without it"),
        )),
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
