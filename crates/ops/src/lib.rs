//! The operations HTTP listener (`[http]`): `GET /metrics` (Prometheus text format), `/healthz`,
//! `/readyz`, the admin API under `/api/`, answered through an [`OpsPort`] the broker
//! implements, and the dashboard at `/` (`dashboard.rs`, with its last hour of figures kept by
//! `history.rs`). It runs on threads of its own with blocking sockets (`server.rs`), never on a
//! reactor.

mod credentials;
mod dashboard;
pub mod exposition;
mod guard;
pub mod history;
pub mod port;
mod request;
mod response;
mod routes;
pub mod scrape;
mod server;
pub mod settings;
mod target;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

use rustls::ServerConfig;

pub use dashboard::weight as dashboard_weight;
pub use port::{AdminRequest, AdminResponse, OpsPort};
pub use scrape::Scrape;
pub use settings::HttpSettings;

use server::Server;

/// Why the operations listener did not start.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// Its address could not be bound.
    #[error("operations listener (http.bind): cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// Its certificate or key is unusable.
    #[error("operations listener (http.tls_cert_file, http.tls_key_file): {0}")]
    Tls(#[from] transport::TransportError),
    /// Its thread could not be started.
    #[error("operations listener: cannot start its thread: {0}")]
    Thread(std::io::Error),
}

/// A bound listener, not serving yet: binding and loading the certificate happen before the
/// shards start, so a bad `[http]` stops the start with nothing to undo.
pub struct OpsListener {
    listener: TcpListener,
    addr: SocketAddr,
    tls: Option<Arc<ServerConfig>>,
    settings: HttpSettings,
}

impl OpsListener {
    /// Binds `settings.bind` and loads its certificate; `Ok(None)` when no listener is
    /// configured.
    pub fn bind(settings: &HttpSettings) -> Result<Option<Self>, OpsError> {
        let Some(addr) = settings.bind else {
            return Ok(None);
        };
        let tls = match &settings.tls {
            Some((cert, key)) => Some(Arc::new(transport::load_server_config(cert, key)?)),
            None => None,
        };
        let listener = TcpListener::bind(addr).map_err(|source| OpsError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| OpsError::Bind { addr, source })?;
        Ok(Some(Self {
            listener,
            addr,
            tls,
            settings: settings.clone(),
        }))
    }

    /// Starts serving, answering through `port`.
    pub fn serve(self, port: Arc<dyn OpsPort>) -> Result<OpsServer, OpsError> {
        let server = Arc::new(Server::new(port, &self.settings, self.tls));
        let sampler = (server.history)
            .spawn_sampler(Arc::clone(&server.port))
            .map_err(OpsError::Thread)?;
        let acceptor = match server::spawn_acceptor(Arc::clone(&server), self.listener) {
            Ok(acceptor) => acceptor,
            Err(error) => {
                server.history.stop();
                return Err(OpsError::Thread(error));
            }
        };
        tracing::info!(addr = %self.addr, https = server.tls.is_some(), "operations listener serving");
        Ok(OpsServer {
            addr: self.addr,
            server,
            acceptor: Some(acceptor),
            sampler: Some(sampler),
        })
    }
}

/// The running listener; stopped by [`OpsServer::stop`] or when dropped.
pub struct OpsServer {
    addr: SocketAddr,
    server: Arc<Server>,
    acceptor: Option<JoinHandle<()>>,
    /// The dashboard history's sampler (`history.rs`).
    sampler: Option<JoinHandle<()>>,
}

impl OpsServer {
    /// The bound address (port 0 resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes the open connections and waits for the threads (boundedly).
    pub fn stop(&mut self) {
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        self.server
            .stopping
            .store(true, std::sync::atomic::Ordering::Release);
        if server::wake(self.addr) {
            let _ = acceptor.join();
        }
        self.server.stop();
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
    }
}

impl Drop for OpsServer {
    fn drop(&mut self) {
        self.stop();
    }
}
