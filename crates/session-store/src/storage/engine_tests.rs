//! The contract suite (`contract_tests.rs`) run against every engine, and what only durable
//! engines promise: state survives a reopen, a refused batch leaves nothing, corrupt data is
//! reported, an unusable path is named.

use std::path::Path;

use codec::QoS;
use tempfile::TempDir;

use super::contract_tests::{self as contract, acked, queued, saved, sent, subscribed, text};
use super::*;
use crate::SessionExpiry;

/// A durable engine together with its temporary directory (removed on drop, after the engine).
struct InTempDir<S> {
    storage: S,
    _dir: TempDir,
}

impl<S: SessionStorage> SessionStorage for InTempDir<S> {
    fn load(&mut self) -> Result<Recovered, StorageError> {
        self.storage.load()
    }
    fn commit(&mut self, batch: &[SessionWrite]) -> Result<(), StorageError> {
        self.storage.commit(batch)
    }
}

fn temp_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("ringmq-storage-")
        .tempdir_in(std::env::temp_dir())
        .unwrap()
}

fn fresh<S>(open: fn(&Path) -> Result<S, StorageError>) -> InTempDir<S> {
    let dir = temp_dir();
    let storage = open(&dir.path().join("db")).unwrap();
    InTempDir { storage, _dir: dir }
}

macro_rules! contract_suite {
    ($make:expr) => {
        use super::*;

        #[test]
        fn a_sequence_of_writes_loads_as_the_sessions_it_describes() {
            contract::a_sequence_of_writes_loads_as_the_sessions_it_describes($make);
        }

        #[test]
        fn acknowledged_and_removed_state_is_gone() {
            contract::acknowledged_and_removed_state_is_gone($make);
        }

        #[test]
        fn a_batch_is_applied_whole_or_not_at_all() {
            contract::a_batch_is_applied_whole_or_not_at_all($make);
        }

        #[test]
        fn writes_that_do_not_follow_the_stored_state_are_refused() {
            contract::writes_that_do_not_follow_the_stored_state_are_refused($make);
        }
    };
}

macro_rules! durable_suite {
    ($engine:ty) => {
        contract_suite!(|| fresh(<$engine>::open));

        #[test]
        fn state_survives_a_reopen() {
            durable_state_survives_a_reopen(<$engine>::open);
        }

        #[test]
        fn a_refused_batch_leaves_nothing_after_a_reopen() {
            durable_refused_batch_leaves_nothing(<$engine>::open);
        }

        #[test]
        fn a_corrupt_record_loads_as_corrupt() {
            let mut store = fresh(<$engine>::open);
            store.commit(&[saved("a", SessionExpiry::Never)]).unwrap();
            store.storage.put_raw_record(&text("a"), b"\x01garbage");
            assert_corrupt(store.load());
        }

        #[test]
        fn a_regular_file_is_not_a_store() {
            durable_regular_file_is_not_a_store(<$engine>::open);
        }
    };
}

mod recording {
    contract_suite!(RecordingStorage::default);
}

mod sled {
    durable_suite!(SledStorage);
}

mod redb {
    durable_suite!(RedbStorage);
}

/// Opens `path` again after the previous handle was dropped. sled releases its file lock from
/// a background thread shortly after the last handle goes, so a lock still held is retried
/// (bounded: a hang guard, not a timing assertion).
fn reopen<S: SessionStorage>(open: fn(&Path) -> Result<S, StorageError>, path: &Path) -> S {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match open(path) {
            Ok(storage) => return storage,
            Err(error) if error.to_string().contains("lock") => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "still locked: {error}"
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(error) => panic!("reopening {}: {error}", path.display()),
        }
    }
}

fn durable_state_survives_a_reopen<S: SessionStorage>(open: fn(&Path) -> Result<S, StorageError>) {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let batch = [
        saved("a", SessionExpiry::After(60)),
        subscribed("a", "x/+", QoS::AtLeastOnce),
        queued("a", 1, QoS::AtLeastOnce),
        queued("a", 2, QoS::ExactlyOnce),
        sent("a", 1, 7),
        saved("b", SessionExpiry::Never),
    ];
    let expected = {
        let mut model = RecordingStorage::default();
        model.commit(&batch).unwrap();
        model.load().unwrap()
    };
    let mut storage = open(&path).unwrap();
    storage.commit(&batch).unwrap();
    drop(storage);
    assert_eq!(reopen(open, &path).load().unwrap(), expected);
}

fn durable_refused_batch_leaves_nothing<S: SessionStorage>(
    open: fn(&Path) -> Result<S, StorageError>,
) {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage = open(&path).unwrap();
    storage.commit(&[saved("a", SessionExpiry::Never)]).unwrap();
    let before = storage.load().unwrap();
    let refused = [
        queued("a", 1, QoS::AtLeastOnce),
        saved("b", SessionExpiry::Never),
        acked(3),
        subscribed("a", "t", QoS::AtLeastOnce),
    ];
    let error = storage.commit(&refused).unwrap_err();
    assert!(matches!(
        error,
        StorageError::Inconsistent {
            write: "InflightAcked",
            ..
        }
    ));
    assert_eq!(storage.load().unwrap(), before);
    drop(storage);
    assert_eq!(reopen(open, &path).load().unwrap(), before);
}

fn assert_corrupt(loaded: Result<Recovered, StorageError>) {
    match loaded {
        Err(StorageError::Corrupt { reason }) => {
            assert!(reason.contains("\\x01a"), "names the key: {reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

fn durable_regular_file_is_not_a_store<S: SessionStorage + std::fmt::Debug>(
    open: fn(&Path) -> Result<S, StorageError>,
) {
    let dir = temp_dir();
    let path = dir.path().join("not-a-store");
    std::fs::write(&path, b"just a file").unwrap();
    match open(&path) {
        Err(StorageError::Engine { reason, .. }) => {
            assert!(reason.contains(&*path.to_string_lossy()), "{reason}");
        }
        other => panic!("expected an engine error, got {other:?}"),
    }
}
