//! The typed settings the transports take. The broker builds them from its validated config
//! file (its config module names a bad key); the load generator from its flags.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::proxy::ProxyTrust;

/// The TLS side of a `tls` or `wss` listener. Paths are relative to the working directory;
/// the files are read when the broker starts and on every reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// Certificate chain, PEM.
    pub cert: PathBuf,
    /// Private key (PKCS#8, PKCS#1 or SEC1), PEM.
    pub key: PathBuf,
    /// Client certificates are verified against this CA bundle when set.
    pub client_ca: Option<PathBuf>,
    /// A handshake without a valid client certificate is refused.
    pub require_client_cert: bool,
    /// The client certificate's Common Name becomes the username.
    pub identity_as_username: bool,
    /// Certificate revocation lists (PEM) of the client CAs: a revoked client certificate is
    /// refused, and so is one whose issuer has no list here.
    pub crl: Option<PathBuf>,
    /// An OCSP response (DER) for the server certificate, stapled to every handshake; the
    /// operator refreshes the file and reloads.
    pub ocsp_response: Option<PathBuf>,
}

/// What a listener speaks on top of TCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenerKind {
    /// MQTT over TLS.
    Tls(TlsSettings),
    /// MQTT over WebSocket, upgraded at `path`.
    Ws {
        path: String,
        origins: AllowedOrigins,
    },
    /// MQTT over WebSocket over TLS.
    Wss {
        path: String,
        origins: AllowedOrigins,
        tls: TlsSettings,
    },
}

/// The `Origin` header values a WebSocket upgrade may carry (`allowed_origins`): browsers send
/// the page's origin with every upgrade, so a listed set keeps pages of other sites (a page
/// opened on the broker's host reaching a loopback listener) from using the listener. An
/// upgrade without `Origin` (device and server clients send none) is always accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedOrigins(Vec<String>);

impl AllowedOrigins {
    /// Origins as `scheme://host[:port]`, compared without regard to case; none: any origin.
    pub fn new(origins: Vec<String>) -> Self {
        Self(
            origins
                .into_iter()
                .map(|o| o.to_ascii_lowercase())
                .collect(),
        )
    }

    /// Whether an upgrade whose `Origin` header is `origin` is accepted.
    pub fn admit(&self, origin: Option<&str>) -> bool {
        match origin {
            None => true,
            Some(origin) => {
                self.0.is_empty() || self.0.iter().any(|o| o.eq_ignore_ascii_case(origin))
            }
        }
    }

    /// The origins listed (lower case); empty when any is accepted.
    pub fn listed(&self) -> &[String] {
        &self.0
    }
}

impl ListenerKind {
    /// The name the config file uses.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Tls(_) => "tls",
            Self::Ws { .. } => "ws",
            Self::Wss { .. } => "wss",
        }
    }

    /// The TLS settings, for `tls` and `wss`.
    pub fn tls(&self) -> Option<&TlsSettings> {
        match self {
            Self::Tls(tls) | Self::Wss { tls, .. } => Some(tls),
            Self::Ws { .. } => None,
        }
    }
}

/// A TLS or WebSocket listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportListener {
    pub bind: SocketAddr,
    pub kind: ListenerKind,
    /// Every connection starts with a PROXY protocol header (v1 or v2) from a trusted balancer.
    pub proxy_protocol: bool,
}

/// A QUIC listener (UDP): MQTT over QUIC on `bind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicListener {
    pub bind: SocketAddr,
    pub settings: QuicSettings,
}

/// A QUIC listener's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuicSettings {
    /// Certificate, key and client verification, as for a TLS listener.
    pub tls: TlsSettings,
    /// A connection with no packet for this long is closed (QUIC's idle timeout; the MQTT
    /// keep-alive check runs above it as on any transport).
    pub idle_timeout: Duration,
    /// Connections one shard holds at most; more are refused (CONNECTION_REFUSED).
    pub max_connections_per_shard: usize,
    /// Bytes the peer may send on its stream before the broker reads them (the stream's
    /// receive window): what one connection can make the broker hold in QUIC.
    pub stream_window: u32,
    /// Resumption tickets the listener remembers (each single-use, the oldest forgotten
    /// first); 0: no resumption, so no 0-RTT.
    pub resumption_tickets: usize,
    /// A resumed client may send MQTT packets in 0-RTT; the replay-safe ones are handled
    /// before the handshake completes (`quic/early.rs`).
    pub zero_rtt: bool,
}

impl QuicSettings {
    /// Defaults for `tls`: a 60 s idle timeout, 10,000 connections a shard, a 64 KiB window,
    /// 4,096 resumption tickets, 0-RTT on.
    pub fn new(tls: TlsSettings) -> Self {
        Self {
            tls,
            idle_timeout: Duration::from_secs(60),
            max_connections_per_shard: 10_000,
            stream_window: 64 * 1024,
            resumption_tickets: 4096,
            zero_rtt: true,
        }
    }
}

/// Every validated listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSettings {
    pub tcp: Vec<SocketAddr>,
    /// Plain TCP listeners whose connections start with a PROXY protocol header.
    pub proxy_tcp: Vec<SocketAddr>,
    pub transports: Vec<TransportListener>,
    /// MQTT over QUIC listeners (UDP: their addresses are apart from the TCP ones).
    pub quic: Vec<QuicListener>,
    /// Whose PROXY protocol headers are believed, on every listener that expects one.
    pub proxy_trusted: ProxyTrust,
}

impl ListenerSettings {
    /// Every address to bind, in the order the runtime reports them: the TCP listeners, the
    /// TCP listeners behind a balancer, then the TLS and WebSocket listeners in config order.
    pub fn binds(&self) -> Vec<SocketAddr> {
        let transports = self.transports.iter().map(|t| t.bind);
        let tcp = self.tcp.iter().chain(&self.proxy_tcp).copied();
        tcp.chain(transports).collect()
    }

    /// Whether any listener expects a PROXY protocol header.
    pub fn any_proxy(&self) -> bool {
        !self.proxy_tcp.is_empty() || self.transports.iter().any(|t| t.proxy_protocol)
    }
}

/// How a client reaches the broker: plain TCP when neither is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSettings {
    /// TLS to every host, trusting the CA certificates in this PEM file.
    pub tls_ca: Option<PathBuf>,
    /// The name the server certificate must carry (default: the host's IP address).
    pub tls_server_name: Option<String>,
    /// MQTT over WebSocket at this path (a leading `/` is added when missing); with `tls_ca`,
    /// secure WebSocket.
    pub ws: Option<String>,
}
