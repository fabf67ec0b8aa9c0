//! `[listeners]`: plain TCP addresses plus `[[listeners.tls]]`, `[[listeners.ws]]` and
//! `[[listeners.wss]]` tables, raw and validated (into the `transport` crate's typed settings,
//! re-exported here).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use transport::{
    AllowedOrigins, ListenerKind, ListenerSettings, TlsSettings, TransportListener,
};

use super::error::ConfigError;
use super::fields::parse_listen_addr;
use super::overlay::raw_section;

raw_section!(
    /// `[listeners]`
    RawListeners {
        tcp: Vec<String>,
        tls: Vec<RawTlsListener>,
        ws: Vec<RawWsListener>,
        wss: Vec<RawWssListener>,
    }
);

/// `[[listeners.tls]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTlsListener {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_client_cert: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_as_username: Option<bool>,
}

/// `[[listeners.ws]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawWsListener {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_origins: Option<Vec<String>>,
}

/// `[[listeners.wss]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawWssListener {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_origins: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_client_cert: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_as_username: Option<bool>,
}

impl RawListeners {
    /// Validates every listener; at least one of any kind is required.
    pub(super) fn validate(&self) -> Result<ListenerSettings, ConfigError> {
        let tcp = self
            .tcp
            .iter()
            .flatten()
            .map(|text| parse_listen_addr("listeners.tcp", text))
            .collect::<Result<Vec<_>, _>>()?;
        let mut transports = Vec::new();
        for raw in self.tls.iter().flatten() {
            let kind = ListenerKind::Tls(tls_settings("listeners.tls", raw.into())?);
            transports.push(listener("listeners.tls.bind", &raw.bind, kind)?);
        }
        for raw in self.ws.iter().flatten() {
            let path = ws_path("listeners.ws.path", &raw.path)?;
            let origins = allowed_origins("listeners.ws.allowed_origins", &raw.allowed_origins)?;
            transports.push(listener(
                "listeners.ws.bind",
                &raw.bind,
                ListenerKind::Ws { path, origins },
            )?);
        }
        for raw in self.wss.iter().flatten() {
            let path = ws_path("listeners.wss.path", &raw.path)?;
            let origins = allowed_origins("listeners.wss.allowed_origins", &raw.allowed_origins)?;
            let tls = tls_settings("listeners.wss", raw.into())?;
            let kind = ListenerKind::Wss { path, origins, tls };
            transports.push(listener("listeners.wss.bind", &raw.bind, kind)?);
        }
        if tcp.is_empty() && transports.is_empty() {
            return Err(ConfigError::invalid(
                "listeners.tcp",
                "at least one listener (tcp, tls, ws or wss) is required",
            ));
        }
        let settings = ListenerSettings { tcp, transports };
        reject_duplicate_binds(&settings.binds())?;
        Ok(settings)
    }
}

/// The TLS keys shared by `tls` and `wss` tables.
struct RawTlsKeys<'a> {
    cert: &'a Option<String>,
    key: &'a Option<String>,
    client_ca: &'a Option<String>,
    require_client_cert: Option<bool>,
    identity_as_username: Option<bool>,
}

impl<'a> From<&'a RawTlsListener> for RawTlsKeys<'a> {
    fn from(raw: &'a RawTlsListener) -> Self {
        Self {
            cert: &raw.cert,
            key: &raw.key,
            client_ca: &raw.client_ca,
            require_client_cert: raw.require_client_cert,
            identity_as_username: raw.identity_as_username,
        }
    }
}

impl<'a> From<&'a RawWssListener> for RawTlsKeys<'a> {
    fn from(raw: &'a RawWssListener) -> Self {
        Self {
            cert: &raw.cert,
            key: &raw.key,
            client_ca: &raw.client_ca,
            require_client_cert: raw.require_client_cert,
            identity_as_username: raw.identity_as_username,
        }
    }
}

fn tls_settings(table: &'static str, raw: RawTlsKeys<'_>) -> Result<TlsSettings, ConfigError> {
    let path = |value: &Option<String>, name: &str| -> Result<PathBuf, ConfigError> {
        match value.as_deref() {
            Some(text) if !text.is_empty() => Ok(PathBuf::from(text)),
            _ => Err(ConfigError::invalid(
                table,
                format!("`{name}` (a PEM file) is required"),
            )),
        }
    };
    let settings = TlsSettings {
        cert: path(raw.cert, "cert")?,
        key: path(raw.key, "key")?,
        client_ca: raw
            .client_ca
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        require_client_cert: raw.require_client_cert.unwrap_or(false),
        identity_as_username: raw.identity_as_username.unwrap_or(false),
    };
    if settings.client_ca.is_none()
        && (settings.require_client_cert || settings.identity_as_username)
    {
        return Err(ConfigError::invalid(
            table,
            "`require_client_cert` and `identity_as_username` need `client_ca` (the CA that \
             signs client certificates)",
        ));
    }
    Ok(settings)
}

/// A WebSocket listener's `allowed_origins`: each `http://` or `https://` with a host and an
/// optional port, nothing after (what browsers send in `Origin`).
fn allowed_origins(
    key: &'static str,
    origins: &Option<Vec<String>>,
) -> Result<AllowedOrigins, ConfigError> {
    let origins = origins.clone().unwrap_or_default();
    for origin in &origins {
        let host = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"));
        let valid = host.is_some_and(|host| {
            !host.is_empty() && !host.contains(['/', '?', '#', ' ']) && !host.ends_with(':')
        });
        if !valid {
            return Err(ConfigError::invalid(
                key,
                format!(
                    "{origin:?} is not an origin (scheme://host or scheme://host:port, \
                     scheme http or https, no path)"
                ),
            ));
        }
    }
    Ok(AllowedOrigins::new(origins))
}

fn ws_path(key: &'static str, path: &Option<String>) -> Result<String, ConfigError> {
    let path = path.clone().unwrap_or_else(|| "/mqtt".to_owned());
    if !path.starts_with('/') || path.contains(char::is_whitespace) {
        return Err(ConfigError::invalid(
            key,
            format!("{path:?} is not a URL path (it starts with `/`, without spaces)"),
        ));
    }
    Ok(path)
}

fn listener(
    key: &'static str,
    bind: &Option<String>,
    kind: ListenerKind,
) -> Result<TransportListener, ConfigError> {
    let text = bind
        .as_deref()
        .ok_or_else(|| ConfigError::invalid(key, "missing (HOST:PORT to listen on)"))?;
    Ok(TransportListener {
        bind: parse_listen_addr(key, text)?,
        kind,
    })
}

/// Two listeners on one address would share its connections at random.
fn reject_duplicate_binds(binds: &[SocketAddr]) -> Result<(), ConfigError> {
    for (index, addr) in binds.iter().enumerate() {
        if addr.port() != 0 && binds[..index].contains(addr) {
            return Err(ConfigError::invalid(
                "listeners",
                format!("{addr} is configured for two listeners"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_origins_are_scheme_and_host_only() {
        let key = "listeners.ws.allowed_origins";
        let check = |origins: &[&str]| {
            allowed_origins(
                key,
                &Some(origins.iter().map(|o| (*o).to_owned()).collect()),
            )
        };
        assert!(check(&["https://a.example", "http://127.0.0.1:8080"]).is_ok());
        for bad in [
            "a.example",
            "https://",
            "https://a.example/",
            "ftp://a",
            "http://a:",
        ] {
            let error = check(&[bad]).unwrap_err().to_string();
            assert!(
                error.contains(key) && error.contains("not an origin"),
                "{error}"
            );
        }
    }
}
