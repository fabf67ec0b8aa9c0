//! The start-up choice of the I/O backend: io_uring when its probe passes, else epoll.

use crate::config::{BackendChoice, BackendKind, RuntimeConfig};
use crate::error::RuntimeError;

/// Resolves the configured choice (and `RINGMQ_BACKEND`) to the backend the shards will use.
/// `Auto` probes io_uring and falls back to epoll; `Uring` reports why io_uring cannot be used.
pub(crate) fn select_backend(config: &RuntimeConfig) -> Result<BackendKind, RuntimeError> {
    match config.backend.with_env_override()? {
        BackendChoice::Epoll => Ok(BackendKind::Epoll),
        BackendChoice::Uring => {
            crate::uring::probe(config)?;
            Ok(BackendKind::Uring)
        }
        BackendChoice::Auto => match crate::uring::probe(config) {
            Ok(()) => Ok(BackendKind::Uring),
            Err(_) => Ok(BackendKind::Epoll),
        },
    }
}
