//! Why a transport could not be set up: on the server side ([`TransportError`]: a listener's
//! certificate files) and on the client side ([`ClientError`]); and why a TLS listener refused
//! a client certificate, when an operator can fix the cause ([`CertificateRefusal`]).

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
    /// MQTT over QUIC cannot be set up as asked (no CA file, a WebSocket path, no TLS 1.3).
    #[error("QUIC: {0}")]
    Quic(String),
}

/// Why a TLS listener refused a client's certificate chain, for the causes an operator can fix
/// (the client gets the same alert as for any refused certificate: certificate unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CertificateRefusal {
    /// The client's own certificate is not X.509 v3, so it has no extensions (what
    /// `openssl x509 -req` makes without `-extfile`); webpki accepts only v3.
    #[error(
        "client certificate is X.509 v{version} (no extensions): reissue it with v3 extensions, \
         e.g. `openssl x509 -req ... -extfile client.ext` with basicConstraints=CA:FALSE, \
         keyUsage=digitalSignature, extendedKeyUsage=clientAuth"
    )]
    ClientNotV3 { version: u8 },
    /// An intermediate CA certificate the client sent with its own is not X.509 v3.
    #[error(
        "an intermediate CA certificate the client sent is X.509 v{version} (no extensions): \
         reissue it with v3 extensions (basicConstraints=critical,CA:TRUE, \
         keyUsage=keyCertSign), or put it in client_ca, where a v1 CA is accepted"
    )]
    IntermediateNotV3 { version: u8 },
}

impl CertificateRefusal {
    /// The refusal a handshake failed with, if it was one of these.
    pub(crate) fn of(error: &rustls::Error) -> Option<Self> {
        let rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other)) = error
        else {
            return None;
        };
        other.0.downcast_ref::<Self>().copied()
    }
}
