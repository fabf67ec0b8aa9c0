//! Damaged files of the B-tree engines at open: a truncated redb file (the redb engine's, or
//! the log engine's checkpoint) is refused with an error naming it, never a panic.

use std::path::Path;

use crate::SessionExpiry;
use crate::storage::contract_writes::saved;
use crate::storage::engine_tests::temp_dir;
use crate::storage::{LoggedStorage, RedbStorage, SessionStorage, StorageError, SyncMode};

/// Cuts the file at `path` to half its length.
fn truncate_to_half(path: &Path) {
    let len = std::fs::metadata(path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(len / 2).unwrap();
}

/// The error of `open`, which must neither succeed nor panic.
fn refusal<T>(open: impl FnOnce() -> Result<T, StorageError> + std::panic::UnwindSafe) -> String {
    match std::panic::catch_unwind(open) {
        Ok(Err(error)) => error.to_string(),
        Ok(Ok(_)) => panic!("a truncated database was opened"),
        Err(_) => panic!("opening a truncated database panicked"),
    }
}

#[test]
fn a_truncated_redb_file_is_refused_with_an_error_naming_it() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage = RedbStorage::open(&path, SyncMode::EveryCommit).unwrap();
    for i in 0..200 {
        let batch = [saved(&format!("client-{i}"), SessionExpiry::Never)];
        storage.commit(&batch).unwrap();
    }
    drop(storage);
    truncate_to_half(&path.join("sessions.redb"));
    let message = refusal(|| RedbStorage::open(&path, SyncMode::EveryCommit));
    assert!(message.contains("sessions.redb"), "{message}");
}

#[test]
fn a_truncated_log_checkpoint_is_refused_with_an_error_naming_it() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage = LoggedStorage::open(&path, SyncMode::EveryCommit).unwrap();
    for i in 0..200 {
        let batch = [saved(&format!("client-{i}"), SessionExpiry::Never)];
        storage.commit(&batch).unwrap();
    }
    drop(storage);
    // Reopening checkpoints what the log held.
    drop(LoggedStorage::open(&path, SyncMode::EveryCommit).unwrap());
    truncate_to_half(&path.join("checkpoint.redb"));
    let message = refusal(|| LoggedStorage::open(&path, SyncMode::EveryCommit));
    assert!(message.contains("checkpoint.redb"), "{message}");
}
