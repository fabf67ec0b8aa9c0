//! Why a bridge's connection failed: the crate's error type, shared by its modules.

use codec::ReasonCode;

/// Why a bridge's connection failed (it is retried after the backoff).
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The remote's name did not resolve.
    #[error("resolving {address}: {source}")]
    Resolve {
        address: String,
        source: std::io::Error,
    },
    /// No address of the remote accepted a TCP connection.
    #[error("connecting to {address}: {source}")]
    Connect {
        address: String,
        source: std::io::Error,
    },
    /// A TLS file, setting or handshake failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// A socket read or write failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The remote broker refused the CONNECT.
    #[error("the remote broker refused the connection: {}", .0.name())]
    Refused(ReasonCode),
    /// The local broker refused the CONNECT (local_username/local_password, `[ip]`).
    #[error("the local broker refused the bridge's connection: {}", .0.name())]
    LocalRefused(ReasonCode),
    /// The peer sent something a client does not expect.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The connection closed.
    #[error("connection closed")]
    Closed,
    /// No answer in time (CONNACK, PINGRESP).
    #[error("timed out")]
    Timeout,
    /// A connection of a running bridge ended.
    #[error("{side} connection lost: {cause}")]
    Lost { side: &'static str, cause: String },
}
