//! [`CloseReason`]: why a connection ended, as the handler and the close state machine see it.

use std::io;

/// Why a connection ended, given to [`crate::Handler::on_closed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The handler called [`crate::ShardCtx::close`] or [`crate::ShardCtx::abort`].
    Local,
    /// The peer closed its side and the connection was then closed (see
    /// [`crate::Handler::on_read_closed`]).
    PeerClosed,
    /// A read or write failed (connection reset, broken pipe, ...).
    Error {
        /// The kind of the OS error.
        kind: io::ErrorKind,
    },
    /// A graceful close could not send its queued bytes within `drain_timeout`.
    DrainTimeout,
    /// The runtime is shutting down.
    Shutdown,
}
