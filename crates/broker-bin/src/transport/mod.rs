//! TLS and WebSocket listeners: which listener accepted a connection, and the stream layer
//! ([`MqttTransport`]) that connection gets. The codec still sees plain MQTT bytes.

mod layer;
mod tls;
mod tls_session;
mod ws;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

pub(crate) use layer::MqttTransport;
use tls::TlsSource;
pub(crate) use tls::load_server_config;
use ws::WsSession;

use crate::config::{ListenerKind, ListenerSettings};

/// Why a TLS listener could not be set up (at start or on reload).
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A certificate, key or CA file is missing, unreadable or not PEM.
    #[error("cannot use {what} file {}: {cause}", path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        cause: String,
    },
    /// The key does not belong to the certificate, or one of them is unusable.
    #[error("certificate {} and key {} do not make a usable pair: {cause}", cert.display(), key.display())]
    KeyPair {
        cert: PathBuf,
        key: PathBuf,
        cause: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Tls(String),
}

/// What one configured listener adds on top of TCP.
enum Transport {
    Plain,
    Tls(TlsSource),
    Ws(Arc<str>),
    Wss(Arc<str>, TlsSource),
}

/// Every listener, in the order the runtime binds them (see [`ListenerSettings::binds`]).
pub(crate) struct Transports {
    listeners: Vec<(SocketAddr, Transport)>,
    /// The bound addresses (port 0 resolved), set once the runtime has bound them.
    bound: OnceLock<Vec<SocketAddr>>,
    /// Largest WebSocket message accepted.
    max_ws_message: usize,
    any: bool,
}

impl Transports {
    /// Loads every TLS listener's certificate and key; an error names the file.
    pub(crate) fn load(
        settings: &ListenerSettings,
        max_packet_size: u32,
    ) -> Result<Self, TransportError> {
        let mut listeners: Vec<(SocketAddr, Transport)> = settings
            .tcp
            .iter()
            .map(|addr| (*addr, Transport::Plain))
            .collect();
        for listener in &settings.transports {
            let transport = match &listener.kind {
                ListenerKind::Tls(tls) => Transport::Tls(TlsSource::load(tls.clone())?),
                ListenerKind::Ws { path } => Transport::Ws(Arc::from(path.as_str())),
                ListenerKind::Wss { path, tls } => {
                    Transport::Wss(Arc::from(path.as_str()), TlsSource::load(tls.clone())?)
                }
            };
            listeners.push((listener.bind, transport));
        }
        Ok(Self {
            any: !settings.transports.is_empty(),
            listeners,
            bound: OnceLock::new(),
            max_ws_message: (max_packet_size as usize).saturating_mul(2).max(64 * 1024),
        })
    }

    /// Plain TCP only (until [`Self::load`] replaces it).
    pub(crate) fn plain() -> Self {
        Self {
            listeners: Vec::new(),
            bound: OnceLock::new(),
            max_ws_message: 0,
            any: false,
        }
    }

    /// Records the bound addresses, in bind order.
    pub(crate) fn set_bound(&self, addrs: &[SocketAddr]) {
        let _ = self.bound.set(addrs.to_vec());
    }

    /// Whether any listener speaks TLS or WebSocket.
    pub(crate) fn any(&self) -> bool {
        self.any
    }

    /// The bound addresses of listeners of `kind` ("tcp", "tls", "ws" or "wss").
    pub(crate) fn addrs_of(&self, kind: &str) -> Vec<SocketAddr> {
        let bound = self.bound.get();
        self.listeners
            .iter()
            .enumerate()
            .filter(|(_, (_, transport))| transport.name() == kind)
            .map(|(index, (addr, _))| bound.and_then(|b| b.get(index)).copied().unwrap_or(*addr))
            .collect()
    }

    /// Reads every TLS listener's files again; the errors of those that keep their old ones.
    pub(crate) fn reload(&self) -> Vec<TransportError> {
        self.listeners
            .iter()
            .filter_map(|(_, transport)| match transport {
                Transport::Tls(tls) | Transport::Wss(_, tls) => tls.reload().err(),
                Transport::Plain | Transport::Ws(_) => None,
            })
            .collect()
    }

    /// The layer for a connection accepted on `local` from `peer`; `None` for plain TCP.
    pub(crate) fn layer_for(
        &self,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Option<Result<MqttTransport, String>> {
        let Some(transport) = self.listener_at(local) else {
            // Only before the bound addresses are known, for a port-0 listener: never serve
            // plain MQTT on what may be a TLS port.
            return Some(Err(format!("no listener known for {local} yet")));
        };
        let ws = |path: &Arc<str>| WsSession::new(Arc::clone(path), self.max_ws_message);
        let layer = match transport {
            Transport::Plain => return None,
            Transport::Ws(path) => Ok(MqttTransport::new(None, Some(ws(path)), peer, false)),
            Transport::Tls(tls) => tls.accept().map(|session| {
                MqttTransport::new(
                    Some(session),
                    None,
                    peer,
                    tls.settings().identity_as_username,
                )
            }),
            Transport::Wss(path, tls) => tls.accept().map(|session| {
                let identity = tls.settings().identity_as_username;
                MqttTransport::new(Some(session), Some(ws(path)), peer, identity)
            }),
        };
        Some(layer.map_err(|e| format!("TLS session: {e}")))
    }

    /// The listener bound to `local`: an exact address first, then a wildcard one on its port.
    /// Before the runtime reported the bound addresses, the configured ones stand in.
    fn listener_at(&self, local: SocketAddr) -> Option<&Transport> {
        let configured: Vec<SocketAddr>;
        let bound = match self.bound.get() {
            Some(bound) => bound,
            None => {
                configured = self.listeners.iter().map(|(addr, _)| *addr).collect();
                &configured
            }
        };
        let addrs = || bound.iter().zip(&self.listeners);
        let exact = addrs().find(|(addr, _)| **addr == local);
        let wildcard =
            || addrs().find(|(addr, _)| addr.port() == local.port() && addr.ip().is_unspecified());
        exact.or_else(wildcard).map(|(_, (_, transport))| transport)
    }
}

impl Transport {
    fn name(&self) -> &'static str {
        match self {
            Self::Plain => "tcp",
            Self::Tls(_) => "tls",
            Self::Ws(_) => "ws",
            Self::Wss(..) => "wss",
        }
    }
}
