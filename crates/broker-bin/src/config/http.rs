//! `[http]`: the operations HTTP listener (`/metrics`, `/healthz`, `/readyz`, `/api/`),
//! validated; like `[auth]`, a listener reachable from other hosts never starts open.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use broker_api::Secret;

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
    }
);

/// HTTP basic credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicCredentials {
    /// `http.username`.
    pub username: String,
    /// `http.password`.
    pub password: Secret,
}

/// `[http]`, validated.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Where to listen; `None`: no operations listener.
    pub bind: Option<SocketAddr>,
    /// A request with `Authorization: Bearer <token>` is let in.
    pub token: Option<Secret>,
    /// A request with `Authorization: Basic ...` naming these is let in.
    pub basic: Option<BasicCredentials>,
    /// Certificate chain and private key (PEM): serve HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Connections served at once: a newcomer beyond it closes the one waiting longest for its
    /// request, or is answered 503 and closed when every one is answering.
    pub max_connections: usize,
    /// Largest request line plus headers (431 beyond).
    pub max_head_bytes: usize,
    /// Largest request body (413 beyond).
    pub max_body_bytes: usize,
    /// Longest wait for a request's next bytes (and for a write to drain).
    pub read_timeout: Duration,
    /// Longest time a request's whole head (request line and headers) may take to arrive,
    /// counted from when the server starts waiting for it.
    pub header_timeout: Duration,
    /// The `Host` values served besides the listener's own address and loopback.
    pub allowed_hosts: AllowedHosts,
}

/// `http.allowed_hosts`: the host names (or addresses) a request's `Host` may name besides the
/// listener's own address, `localhost`, `127.0.0.1` and `[::1]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    /// `"*"` was listed: any `Host` is served (no protection from DNS rebinding).
    pub any: bool,
    /// The names and addresses listed.
    pub hosts: Vec<HostName>,
}

/// A host as `Host` and `http.allowed_hosts` name it, without a port: an IP address, or a DNS
/// name in lower case without its trailing dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostName {
    /// An IPv4 address, or an IPv6 address (in brackets in `Host`).
    Ip(IpAddr),
    /// A DNS name.
    Name(String),
}

impl HostName {
    /// Parses `text` (no port); `None` when it is neither an address nor a DNS name.
    pub fn parse(text: &str) -> Option<Self> {
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            return inner.parse::<Ipv6Addr>().ok().map(|ip| Self::Ip(ip.into()));
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Some(Self::Ip(ip));
        }
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        let label_ok = |label: &str| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        (name.len() <= 253 && name.split('.').all(label_ok)).then_some(Self::Name(name))
    }

    /// Splits an authority (`Host`'s value, or an origin's `host[:port]`) into its host and
    /// port; `None` when malformed. An empty port (`host:`) is no port.
    pub fn parse_authority(authority: &str) -> Option<(Self, Option<u16>)> {
        let (host, port) = match authority.strip_prefix('[') {
            Some(rest) => {
                let close = rest.find(']')?;
                let port = &rest[close + 1..];
                let port = match port {
                    "" => "",
                    _ => port.strip_prefix(':')?,
                };
                (&authority[..close + 2], port)
            }
            None => authority.split_once(':').unwrap_or((authority, "")),
        };
        let port = match port {
            "" => None,
            digits if digits.bytes().all(|b| b.is_ascii_digit()) => Some(digits.parse().ok()?),
            _ => return None,
        };
        Some((Self::parse(host)?, port))
    }
}

impl HttpSettings {
    /// Whether the listener is configured.
    pub fn enabled(&self) -> bool {
        self.bind.is_some()
    }

    /// Whether requests must carry credentials.
    pub fn requires_credentials(&self) -> bool {
        self.token.is_some() || self.basic.is_some()
    }
}

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
