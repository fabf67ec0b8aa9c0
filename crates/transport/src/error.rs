//! Why a transport could not be set up: on the server side ([`TransportError`]: a listener's
//! certificate files) and on the client side ([`ClientError`]).

use std::path::PathBuf;

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

/// Why a client transport could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The CA file could not be read or holds no usable certificate.
    #[error("TLS CA file {}: {cause}", path.display())]
    CaFile { path: PathBuf, cause: String },
    /// The server name is not a DNS name or IP address.
    #[error("TLS server name {name:?}: {cause}")]
    ServerName { name: String, cause: String },
    /// rustls refused the configuration or a new session.
    #[error("TLS: {0}")]
    Tls(rustls::Error),
    /// The WebSocket upgrade request could not be built.
    #[error("WebSocket upgrade request: {0}")]
    WsRequest(tungstenite::Error),
}
