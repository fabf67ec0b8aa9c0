//! [`Transports`]: every configured listener, which of them accepted a connection, and the
//! stream layer ([`MqttTransport`]) that connection gets.

use std::net::SocketAddr;
use std::sync::OnceLock;

use crate::config::{ListenerKind, ListenerSettings};
use crate::error::TransportError;
use crate::hold::HoldLimit;
use crate::proxy::{ProxyReader, ProxyTrust};
use crate::server_layer::MqttTransport;
use crate::stack::TransportKind;
use crate::tls::TlsSource;
use crate::ws::{WsEndpoint, WsSession};

/// What one configured listener adds on top of TCP.
enum Transport {
    Plain,
    Tls(TlsSource),
    Ws(WsEndpoint),
    Wss(WsEndpoint, TlsSource),
}

/// One configured listener: its address, what it adds on top of TCP, and whether its
/// connections start with a PROXY protocol header.
struct Listener {
    addr: SocketAddr,
    transport: Transport,
    proxy: bool,
}

/// Every listener, in the order the runtime binds them (see [`ListenerSettings::binds`]).
pub struct Transports {
    listeners: Vec<Listener>,
    /// Whose PROXY protocol headers are believed.
    trusted: ProxyTrust,
    /// The bound addresses (port 0 resolved), set once the runtime has bound them.
    bound: OnceLock<Vec<SocketAddr>>,
    /// Largest WebSocket message accepted.
    max_ws_message: usize,
    /// The bounds on what a connection's transport holds (unbounded when `None`).
    hold: Option<HoldLimit>,
    any: bool,
}

impl Transports {
    /// Loads every TLS listener's certificate and key; an error names the file.
    pub fn load(settings: &ListenerSettings, max_packet_size: u32) -> Result<Self, TransportError> {
        let plain = |addr: &SocketAddr, proxy| Listener {
            addr: *addr,
            transport: Transport::Plain,
            proxy,
        };
        let mut listeners: Vec<Listener> = settings.tcp.iter().map(|a| plain(a, false)).collect();
        listeners.extend(settings.proxy_tcp.iter().map(|a| plain(a, true)));
        for listener in &settings.transports {
            let transport = match &listener.kind {
                ListenerKind::Tls(tls) => Transport::Tls(TlsSource::load(tls.clone())?),
                ListenerKind::Ws { path, origins } => Transport::Ws(WsEndpoint::new(path, origins)),
                ListenerKind::Wss { path, origins, tls } => Transport::Wss(
                    WsEndpoint::new(path, origins),
                    TlsSource::load(tls.clone())?,
                ),
            };
            listeners.push(Listener {
                addr: listener.bind,
                transport,
                proxy: listener.proxy_protocol,
            });
        }
        Ok(Self {
            any: !settings.transports.is_empty() || settings.any_proxy(),
            listeners,
            trusted: settings.proxy_trusted.clone(),
            bound: OnceLock::new(),
            max_ws_message: (max_packet_size as usize).saturating_mul(2).max(64 * 1024),
            hold: None,
        })
    }

    /// Every connection's transport is bounded by `hold` from now on.
    pub fn with_hold_limit(mut self, hold: HoldLimit) -> Self {
        self.hold = Some(hold);
        self
    }

    /// The largest WebSocket message accepted: twice the largest MQTT packet, at least 64 KiB.
    pub fn max_ws_message(&self) -> usize {
        self.max_ws_message
    }

    /// Plain TCP only (until [`Self::load`] replaces it).
    pub fn plain() -> Self {
        Self {
            listeners: Vec::new(),
            trusted: ProxyTrust::default(),
            bound: OnceLock::new(),
            max_ws_message: 0,
            hold: None,
            any: false,
        }
    }

    /// Records the bound addresses, in bind order.
    pub fn set_bound(&self, addrs: &[SocketAddr]) {
        let _ = self.bound.set(addrs.to_vec());
    }

    /// Whether any listener speaks TLS or WebSocket or expects a PROXY protocol header.
    pub fn any(&self) -> bool {
        self.any
    }

    /// The bound addresses of listeners of `kind` ("tcp", "tls", "ws" or "wss").
    pub fn addrs_of(&self, kind: &str) -> Vec<SocketAddr> {
        let bound = self.bound.get();
        self.listeners
            .iter()
            .enumerate()
            .filter(|(_, listener)| listener.transport.kind().name() == kind)
            .map(|(index, listener)| {
                let bound = bound.and_then(|b| b.get(index)).copied();
                bound.unwrap_or(listener.addr)
            })
            .collect()
    }

    /// Reads every TLS listener's files again; the errors of those that keep their old ones.
    pub fn reload(&self) -> Vec<TransportError> {
        self.listeners
            .iter()
            .filter_map(|listener| match &listener.transport {
                Transport::Tls(tls) | Transport::Wss(_, tls) => tls.reload().err(),
                Transport::Plain | Transport::Ws(_) => None,
            })
            .collect()
    }

    /// Whether the listener that accepted a connection on `local` expects a PROXY protocol
    /// header first (`false` for an unknown listener: [`Self::layer_for`] refuses it).
    pub fn expects_proxy(&self, local: SocketAddr) -> bool {
        self.listener_at(local)
            .is_some_and(|listener| listener.proxy)
    }

    /// Whether a PROXY protocol header from `peer` (the balancer) is believed.
    pub fn trusts_proxy(&self, peer: SocketAddr) -> bool {
        self.trusted.trusts(peer.ip())
    }

    /// A reader for a connection's PROXY protocol header, bounded like its layer.
    pub fn proxy_reader(&self) -> ProxyReader {
        ProxyReader::new(self.hold.as_ref())
    }

    /// What the listener on `local` adds on top of TCP (plain for an unknown one).
    pub fn kind_at(&self, local: SocketAddr) -> TransportKind {
        self.listener_at(local)
            .map_or(TransportKind::Plain, |listener| listener.transport.kind())
    }

    /// The layer for a connection accepted on `local` from `peer` (the client: the address a
    /// PROXY protocol header named, on a listener that expects one); `None` for plain TCP.
    pub fn layer_for(
        &self,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Option<Result<MqttTransport, String>> {
        let Some(listener) = self.listener_at(local) else {
            // Only before the bound addresses are known, for a port-0 listener: never serve
            // plain MQTT on what may be a TLS port.
            return Some(Err(format!("no listener known for {local} yet")));
        };
        let ws = |endpoint: &WsEndpoint| WsSession::new(endpoint.clone(), self.max_ws_message);
        let hold = self.hold.as_ref();
        let layer = match &listener.transport {
            Transport::Plain => return None,
            Transport::Ws(path) => Ok(MqttTransport::server(
                None,
                Some(ws(path)),
                peer,
                false,
                hold,
            )),
            Transport::Tls(tls) => tls.accept().map(|session| {
                let identity = tls.settings().identity_as_username;
                MqttTransport::server(Some(session), None, peer, identity, hold)
            }),
            Transport::Wss(path, tls) => tls.accept().map(|session| {
                let identity = tls.settings().identity_as_username;
                MqttTransport::server(Some(session), Some(ws(path)), peer, identity, hold)
            }),
        };
        Some(layer.map_err(|e| format!("TLS session: {e}")))
    }

    /// The listener bound to `local`: an exact address first, then a wildcard one on its port.
    /// Before the runtime reported the bound addresses, the configured ones stand in.
    fn listener_at(&self, local: SocketAddr) -> Option<&Listener> {
        let configured: Vec<SocketAddr>;
        let bound = match self.bound.get() {
            Some(bound) => bound,
            None => {
                configured = self
                    .listeners
                    .iter()
                    .map(|listener| listener.addr)
                    .collect();
                &configured
            }
        };
        let addrs = || bound.iter().zip(&self.listeners);
        let exact = addrs().find(|(addr, _)| **addr == local);
        let wildcard =
            || addrs().find(|(addr, _)| addr.port() == local.port() && addr.ip().is_unspecified());
        exact.or_else(wildcard).map(|(_, listener)| listener)
    }
}

impl Transport {
    fn kind(&self) -> TransportKind {
        match self {
            Self::Plain => TransportKind::Plain,
            Self::Tls(_) => TransportKind::Tls,
            Self::Ws(_) => TransportKind::Ws,
            Self::Wss(..) => TransportKind::Wss,
        }
    }
}
