//! How a load thread's clients reach the broker: over TCP (plain, or with a TLS / WebSocket
//! layer set once connected) or over QUIC (a virtual connection on the thread's QUIC client
//! endpoint, whose driver makes the TLS 1.3 handshake and carries MQTT on one stream).

use std::fmt::Display;
use std::net::SocketAddr;
use std::sync::Arc;

use ring_runtime::{ConnId, RuntimeError, ShardCtx};
use transport::{ClientError, Connector};

/// The transport of a run, the same for every thread.
#[derive(Clone)]
pub enum Route {
    /// TCP; with a connector, every connection gets its TLS / WebSocket layer.
    Tcp(Option<Arc<Connector>>),
    /// QUIC through the runtime's datagram endpoint of this index (a client endpoint:
    /// `RuntimeConfig::datagram_client_endpoint`).
    Quic { endpoint: usize },
}

/// A thread's route and whether it already printed a transport error.
pub(super) struct Link {
    route: Route,
    /// The first transport error of this thread was printed.
    transport_error_shown: bool,
}

impl Link {
    pub(super) fn new(route: Route) -> Self {
        Self {
            route,
            transport_error_shown: false,
        }
    }

    /// Starts a connection to `host`: a TCP connect (from `bind`, if any), or a QUIC connect.
    pub(super) fn connect<M>(
        &self,
        ctx: &mut ShardCtx<M>,
        host: SocketAddr,
        bind: Option<SocketAddr>,
    ) -> Result<ConnId, RuntimeError> {
        match &self.route {
            Route::Tcp(_) => ctx.connect(host, bind),
            Route::Quic { endpoint } => ctx.connect_datagram(*endpoint, host),
        }
    }

    /// Sets the TLS / WebSocket layer of `conn` (connected to `host`), if the run has one. A
    /// QUIC connection has its TLS in its driver.
    pub(super) fn set_layer<M>(
        &self,
        ctx: &mut ShardCtx<M>,
        conn: ConnId,
        host: SocketAddr,
    ) -> Result<(), ClientError> {
        if let Route::Tcp(Some(connector)) = &self.route {
            ctx.set_layer(conn, Box::new(connector.layer(host)?));
        }
        Ok(())
    }

    /// Whether a failed connect is a transport's failure (a QUIC handshake's: a refused server
    /// certificate, say), worth showing.
    pub(super) fn connects_carry_handshakes(&self) -> bool {
        matches!(self.route, Route::Quic { .. })
    }

    /// Prints `client`'s transport `error` if it is this thread's first.
    pub(super) fn show_error(&mut self, client: &dyn Display, error: &dyn Display) {
        if !std::mem::replace(&mut self.transport_error_shown, true) {
            eprintln!("{client}: transport error: {error}");
        }
    }
}
