//! Why a transport could not be set up ([`TransportError`]: a listener's certificate files).

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
