//! The log engine's name in its errors, and its file error (shared by the engine's files).

use std::path::Path;

use crate::storage::StorageError;

pub(super) const ENGINE: &str = "log";

pub(super) fn file_error(path: &Path, e: &std::io::Error) -> StorageError {
    StorageError::Engine {
        engine: ENGINE,
        reason: format!("{}: {e}", path.display()),
    }
}
