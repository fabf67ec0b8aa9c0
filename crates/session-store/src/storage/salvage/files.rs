//! What check and salvage need around the engines: scratch directories, copies, and the
//! commands that the engines' refusals name. A leaf: it imports no engine.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::storage::StorageError;

/// A directory of its own under the system's temporary directory, removed when dropped.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new() -> Result<Self, StorageError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "ringmq-store-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).map_err(|e| io_error(&path, &e))?;
        Ok(Self(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn io_error(path: &Path, e: &std::io::Error) -> StorageError {
    StorageError::Engine {
        engine: "store tool",
        reason: format!("{}: {e}", path.display()),
    }
}

/// Copies the files of `from` (and its subdirectories) into `to`.
pub(crate) fn copy_dir(from: &Path, to: &Path) -> Result<(), StorageError> {
    std::fs::create_dir_all(to).map_err(|e| io_error(to, &e))?;
    for entry in std::fs::read_dir(from).map_err(|e| io_error(from, &e))? {
        let entry = entry.map_err(|e| io_error(from, &e))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if source.is_dir() {
            copy_dir(&source, &target)?;
        } else {
            std::fs::copy(&source, &target).map_err(|e| io_error(&source, &e))?;
        }
    }
    Ok(())
}

/// The command that reports on the store holding `path` (a file of it, or its directory).
pub(crate) fn check_command(path: &Path) -> String {
    format!("ringmq store check --dir {}", store_dir(path).display())
}

/// The command that salvages the store holding `path`.
pub(crate) fn salvage_command(path: &Path) -> String {
    format!(
        "ringmq store salvage --dir {} --into NEW_DIR",
        store_dir(path).display()
    )
}

fn store_dir(path: &Path) -> &Path {
    if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    }
}
