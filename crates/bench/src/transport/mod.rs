//! Client-side transports as ring-runtime stream layers: TLS (a rustls `ClientConnection`,
//! ring provider), MQTT over WebSocket (tungstenite's client handshake over an in-memory pipe,
//! one masked binary frame per turn) and both together (secure WebSocket: TLS outermost).
//!
//! A plain TCP run builds no [`Connector`] and sets no layer.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ring_runtime::{LayerError, LayerOutput, LayerState, StreamLayer};
use rustls::client::Resumption;
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

use crate::cli::TransportArgs;

#[cfg(test)]
mod tests;
mod tls;
mod ws;

use tls::{drain_tls, tls_receive, tls_send};
use ws::WsClient;

/// The WebSocket subprotocol offered in the upgrade request.
const SUBPROTOCOL: &str = "mqtt";

/// Why a transport could not be set up.
#[derive(Debug)]
pub enum TransportError {
    /// The CA file could not be read or holds no usable certificate.
    CaFile { path: PathBuf, cause: String },
    /// `--tls-server-name` is not a DNS name or IP address.
    ServerName { name: String, cause: String },
    /// rustls refused the configuration or a new session.
    Tls(rustls::Error),
    /// The WebSocket upgrade request could not be built.
    WsRequest(tungstenite::Error),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CaFile { path, cause } => {
                write!(f, "TLS CA file {}: {cause}", path.display())
            }
            Self::ServerName { name, cause } => write!(f, "TLS server name {name:?}: {cause}"),
            Self::Tls(error) => write!(f, "TLS: {error}"),
            Self::WsRequest(error) => write!(f, "WebSocket upgrade request: {error}"),
        }
    }
}

impl std::error::Error for TransportError {}

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
    /// The connector the flags ask for; `None` for plain TCP.
    pub fn from_args(args: &TransportArgs) -> Result<Option<Arc<Self>>, TransportError> {
        if args.tls_ca.is_none() && args.ws.is_none() {
            return Ok(None);
        }
        let tls = match &args.tls_ca {
            None => None,
            Some(ca) => Some(TlsSettings {
                config: client_config(ca)?,
                server_name: args
                    .tls_server_name
                    .as_deref()
                    .map(server_name)
                    .transpose()?,
            }),
        };
        let ws_path = args.ws.as_deref().map(ws_path);
        Ok(Some(Arc::new(Self { tls, ws_path })))
    }

    /// A fresh layer for a connection to `host`.
    pub fn layer(&self, host: SocketAddr) -> Result<ClientLayer, TransportError> {
        let tls = match &self.tls {
            None => None,
            Some(settings) => {
                let name = settings
                    .server_name
                    .clone()
                    .unwrap_or_else(|| ServerName::IpAddress(host.ip().into()));
                let mut tls = ClientConnection::new(Arc::clone(&settings.config), name)
                    .map_err(TransportError::Tls)?;
                // The plaintext queued before the handshake ends (CONNECT) waits in rustls.
                tls.set_buffer_limit(None);
                Some(Box::new(tls))
            }
        };
        let ws = match &self.ws_path {
            None => None,
            Some(path) => Some(Box::new(WsClient::new(host, path)?)),
        };
        Ok(ClientLayer { tls, ws })
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

fn server_name(name: &str) -> Result<ServerName<'static>, TransportError> {
    ServerName::try_from(name.to_owned()).map_err(|e| TransportError::ServerName {
        name: name.to_owned(),
        cause: e.to_string(),
    })
}

/// A client config trusting the certificates in `ca`. Session resumption is off: every
/// connection makes a full handshake, as a fleet of distinct devices would.
fn client_config(ca: &Path) -> Result<Arc<ClientConfig>, TransportError> {
    let ca_error = |cause: String| TransportError::CaFile {
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TransportError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = Resumption::disabled();
    Ok(Arc::new(config))
}

/// One connection's client transport: TLS outermost, WebSocket framing on its plaintext.
pub struct ClientLayer {
    tls: Option<Box<ClientConnection>>,
    ws: Option<Box<WsClient>>,
}

impl StreamLayer for ClientLayer {
    fn receive(&mut self, input: Bytes, out: &mut LayerOutput) -> Result<LayerState, LayerError> {
        match (self.tls.as_deref_mut(), self.ws.as_deref_mut()) {
            (Some(tls), None) => tls_receive(tls, &input, &mut out.plain, &mut out.wire),
            (None, Some(ws)) => ws.receive(&input, &mut out.plain, &mut out.wire),
            (Some(tls), Some(ws)) => {
                let mut decrypted = BytesMut::new();
                let tls_state = tls_receive(tls, &input, &mut decrypted, &mut out.wire)?;
                let mut reply = BytesMut::new();
                let ws_state = ws.receive(&decrypted, &mut out.plain, &mut reply);
                if !reply.is_empty() {
                    tls_send(tls, &[reply.freeze()], &mut out.wire)?;
                }
                match ws_state? {
                    LayerState::Open => Ok(tls_state),
                    closed => Ok(closed),
                }
            }
            (None, None) => {
                out.plain.extend_from_slice(&input);
                Ok(LayerState::Open)
            }
        }
    }

    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        match (self.tls.as_deref_mut(), self.ws.as_deref_mut()) {
            (Some(tls), None) => tls_send(tls, plain, wire),
            (None, Some(ws)) => ws.send(plain, wire),
            (Some(tls), Some(ws)) => {
                let mut framed = BytesMut::new();
                ws.send(plain, &mut framed)?;
                let framed = framed.freeze();
                tls_send(tls, std::slice::from_ref(&framed), wire)
            }
            (None, None) => {
                for frame in plain {
                    wire.extend_from_slice(frame);
                }
                Ok(())
            }
        }
    }

    fn close(&mut self, wire: &mut BytesMut) {
        let mut goodbye = BytesMut::new();
        if let Some(ws) = self.ws.as_deref_mut() {
            ws.close(&mut goodbye);
        }
        match self.tls.as_deref_mut() {
            None => wire.extend_from_slice(&goodbye),
            Some(tls) => {
                let _ = tls_send(tls, &[goodbye.freeze()], wire);
                tls.send_close_notify();
                let _ = drain_tls(tls, wire);
            }
        }
    }
}

fn tls_error(error: impl fmt::Display) -> LayerError {
    LayerError::new(format!("TLS: {error}"))
}
