//! `[http]`'s typed settings: where the operations listener binds, who may use it, its bounds.
//! The broker's config module parses and validates the TOML into them (naming a bad key).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use broker_api::Secret;

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
    /// How often the dashboard's history ring takes a point (it keeps 720).
    pub history_interval: Duration,
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

#[cfg(test)]
impl HttpSettings {
    /// Loopback on port 18083 with the broker's default bounds and no credentials.
    pub(crate) fn for_tests() -> Self {
        Self {
            bind: Some(SocketAddr::from(([127, 0, 0, 1], 18083))),
            token: None,
            basic: None,
            tls: None,
            max_connections: 16,
            max_head_bytes: 16 * 1024,
            max_body_bytes: 1024 * 1024,
            read_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
            allowed_hosts: AllowedHosts::default(),
            history_interval: Duration::from_secs(5),
        }
    }
}
