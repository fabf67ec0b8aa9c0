//! Client-side transports (the load generator's): TLS (a rustls `ClientConnection`, ring
//! provider), MQTT over WebSocket (tungstenite's client handshake, masked frames) and both
//! together (secure WebSocket: TLS outermost), as a [`ClientLayer`].
//!
//! A plain TCP run builds no [`Connector`] and sets no layer.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::client::Resumption;
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

use crate::config::ClientSettings;
use crate::error::ClientError;
use crate::stack::Stack;
use crate::ws::WsClient;

#[cfg(test)]
mod tests;
mod tls;

/// One connection's client transport: TLS outermost, WebSocket framing on its plaintext.
pub type ClientLayer = Stack<ClientConnection, WsClient, ()>;

/// What every connection of a run uses to build its layer.
pub struct Connector {
    tls: Option<TlsSettings>,
    ws_path: Option<Arc<str>>,
}

struct TlsSettings {
    config: Arc<ClientConfig>,
    /// `None`: the host's IP address.
    server_name: Option<ServerName<'static>>,
}

impl Connector {
    /// The connector `settings` ask for; `None` for plain TCP.
    pub fn new(settings: &ClientSettings) -> Result<Option<Arc<Self>>, ClientError> {
        if settings.tls_ca.is_none() && settings.ws.is_none() {
            return Ok(None);
        }
        let tls = match &settings.tls_ca {
            None => None,
            Some(ca) => Some(TlsSettings {
                config: client_config(ca)?,
                server_name: settings
                    .tls_server_name
                    .as_deref()
                    .map(server_name)
                    .transpose()?,
            }),
        };
        let ws_path = settings.ws.as_deref().map(ws_path);
        Ok(Some(Arc::new(Self { tls, ws_path })))
    }

    /// A fresh layer for a connection to `host`.
    pub fn layer(&self, host: SocketAddr) -> Result<ClientLayer, ClientError> {
        let tls = match &self.tls {
            None => None,
            Some(settings) => {
                let name = settings
                    .server_name
                    .clone()
                    .unwrap_or_else(|| ServerName::IpAddress(host.ip().into()));
                let mut tls = ClientConnection::new(Arc::clone(&settings.config), name)
                    .map_err(ClientError::Tls)?;
                // The plaintext queued before the handshake ends (CONNECT) waits in rustls.
                tls.set_buffer_limit(None);
                Some(tls)
            }
        };
        let ws = match &self.ws_path {
            None => None,
            Some(path) => Some(WsClient::new(host, path)?),
        };
        Ok(ClientLayer::new(tls, ws, ()))
    }
}

/// `PATH` with a leading slash.
fn ws_path(path: &str) -> Arc<str> {
    if path.starts_with('/') {
        Arc::from(path)
    } else {
        Arc::from(format!("/{path}"))
    }
}

/// `name` as a TLS server name (a DNS name or an IP address).
pub(crate) fn server_name(name: &str) -> Result<ServerName<'static>, ClientError> {
    ServerName::try_from(name.to_owned()).map_err(|e| ClientError::ServerName {
        name: name.to_owned(),
        cause: e.to_string(),
    })
}

/// A client config trusting the certificates in `ca`. Session resumption is off: every
/// connection makes a full handshake, as a fleet of distinct devices would.
fn client_config(ca: &Path) -> Result<Arc<ClientConfig>, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ClientError::Tls)?
        .with_root_certificates(ca_roots(ca)?)
        .with_no_client_auth();
    config.resumption = Resumption::disabled();
    Ok(Arc::new(config))
}

/// As [`client_config`], TLS 1.3 only (for QUIC, which its handshake carries).
pub(crate) fn tls13_config(ca: &Path) -> Result<ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(ClientError::Tls)?
        .with_root_certificates(ca_roots(ca)?)
        .with_no_client_auth();
    config.resumption = Resumption::disabled();
    Ok(config)
}

/// The certificates of the PEM file `ca`, at least one.
fn ca_roots(ca: &Path) -> Result<RootCertStore, ClientError> {
    let ca_error = |cause: String| ClientError::CaFile {
        path: ca.to_owned(),
        cause,
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| ca_error(e.to_string()))? {
        let cert = cert.map_err(|e| ca_error(e.to_string()))?;
        roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(ca_error("no certificate in the file".to_owned()));
    }
    Ok(roots)
}
