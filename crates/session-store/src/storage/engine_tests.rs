//! The contract suite (`contract_tests.rs`) run against every engine, and what only durable
//! engines promise: state survives a reopen (skips included, deferred syncs included), corrupt
//! data is reported, an unusable path is named.

use std::path::Path;

use codec::QoS;
use tempfile::TempDir;

use super::contract_skip_tests as contract_skip;
use super::contract_tests as contract;
use super::contract_writes::{
    acked, pid, queued, record_without_owner, released, retain_set, saved, saved_by, sent,
    session_without_owner, subscribed, text,
};
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
    fn commit(&mut self, batch: &[SessionWrite]) -> Result<Committed, StorageError> {
        self.storage.commit(batch)
    }
    fn sync(&mut self) -> Result<(), StorageError> {
        self.storage.sync()
    }
    fn queued_after(
        &mut self,
        client_id: &codec::MqttStr,
        after: Option<MessageSeq>,
        limit: usize,
    ) -> Result<Vec<(MessageSeq, StoredMessage)>, StorageError> {
        self.storage.queued_after(client_id, after, limit)
    }
    fn load_paged(&mut self, queued: usize) -> Result<PagedRecovered, StorageError> {
        self.storage.load_paged(queued)
    }
}

/// How a durable engine is opened.
pub(super) type Open<S> = fn(&Path, SyncMode) -> Result<S, StorageError>;

pub(super) fn temp_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("ringmq-storage-")
        .tempdir_in(std::env::temp_dir())
        .unwrap()
}

fn fresh<S>(open: Open<S>, sync: SyncMode) -> InTempDir<S> {
    let dir = temp_dir();
    let storage = open(&dir.path().join("db"), sync).unwrap();
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
        fn the_owner_is_stored_with_the_session_and_replaced_by_each_save() {
            contract::the_owner_is_stored_with_the_session_and_replaced_by_each_save($make);
        }

        #[test]
        fn acknowledged_and_removed_state_is_gone() {
            contract::acknowledged_and_removed_state_is_gone($make);
        }

        #[test]
        fn skipped_writes_are_reported_and_the_rest_of_the_batch_applies() {
            contract_skip::skipped_writes_are_reported_and_the_rest_of_the_batch_applies($make);
        }

        #[test]
        fn each_write_that_does_not_follow_the_stored_state_is_skipped() {
            contract_skip::each_write_that_does_not_follow_the_stored_state_is_skipped($make);
        }

        #[test]
        fn a_message_queued_and_sent_at_once_is_stored_as_sent() {
            contract::a_message_queued_and_sent_at_once_is_stored_as_sent($make);
        }

        #[test]
        fn a_packet_id_used_again_in_one_batch_keeps_its_new_flow() {
            contract::a_packet_id_used_again_in_one_batch_keeps_its_new_flow($make);
        }

        #[test]
        fn retained_messages_are_set_replaced_and_cleared() {
            contract::retained_messages_are_set_replaced_and_cleared($make);
        }

        #[test]
        fn retained_messages_and_sessions_do_not_mix() {
            contract::retained_messages_and_sessions_do_not_mix($make);
        }

        #[test]
        fn delayed_messages_are_set_replaced_cleared_and_loaded_by_id() {
            contract::delayed_messages_are_set_replaced_cleared_and_loaded_by_id($make);
        }

        #[test]
        fn a_queue_is_read_in_pages() {
            contract::a_queue_is_read_in_pages($make);
        }

        #[test]
        fn a_sequence_number_may_come_again_once_the_queue_is_empty() {
            contract::a_sequence_number_may_come_again_once_the_queue_is_empty($make);
        }

        #[test]
        fn inflight_entries_load_in_send_order() {
            contract::inflight_entries_load_in_send_order($make);
        }

        #[test]
        fn the_last_queued_number_is_found_after_the_last_message_left() {
            contract::the_last_queued_number_is_found_after_the_last_message_left($make);
        }

        #[test]
        fn a_removed_session_starts_again_empty() {
            contract::a_removed_session_starts_again_empty($make);
        }
    };
}

macro_rules! durable_suite {
    ($open:expr) => {
        contract_suite!(|| fresh($open, SyncMode::EveryCommit));

        mod deferred {
            contract_suite!(|| fresh($open, SyncMode::Deferred));
        }

        #[test]
        fn state_survives_a_reopen() {
            durable_state_survives_a_reopen($open, SyncMode::EveryCommit);
        }

        #[test]
        fn synced_state_survives_a_reopen() {
            durable_state_survives_a_reopen($open, SyncMode::Deferred);
        }

        #[test]
        fn owners_survive_a_reopen() {
            durable_owners_survive_a_reopen($open);
        }

        #[test]
        fn a_record_stored_before_owners_loads_as_unbound() {
            durable_record_without_owner_loads_as_unbound($open, |storage, key, value| {
                storage.put_raw(key, value)
            });
        }

        #[test]
        fn skipped_writes_stay_skipped_after_a_reopen() {
            durable_skipped_writes_stay_skipped($open);
        }

        #[test]
        fn a_corrupt_record_loads_as_corrupt() {
            let mut store = fresh($open, SyncMode::EveryCommit);
            store.commit(&[saved("a", SessionExpiry::Never)]).unwrap();
            store
                .storage
                .put_raw(&keyed::session_key(&text("a")), b"\x02garbage");
            assert_corrupt(store.load());
        }

        #[test]
        fn a_commit_before_any_load_follows_the_stored_state() {
            durable_commit_before_load($open);
        }

        #[test]
        fn an_entry_of_no_stored_session_is_corrupt() {
            let mut store = fresh($open, SyncMode::EveryCommit);
            store
                .storage
                .put_raw(&keyed::queued_key(&text("a"), 1), b"\x02");
            assert_corrupt(store.load());
            assert_corrupt(
                store
                    .commit(&[saved("b", SessionExpiry::Never)])
                    .map(|_| Recovered::default()),
            );
        }

        #[test]
        fn a_corrupt_inflight_entry_loads_as_corrupt() {
            let mut store = fresh($open, SyncMode::EveryCommit);
            store.commit(&[saved("a", SessionExpiry::Never)]).unwrap();
            store
                .storage
                .put_raw(&keyed::inflight_key(&text("a"), pid(1)), b"\x02");
            assert_corrupt(store.load());
        }

        #[test]
        fn a_regular_file_is_not_a_store() {
            durable_regular_file_is_not_a_store($open);
        }
    };
}

mod recording {
    contract_suite!(RecordingStorage::default);
}

mod sled {
    durable_suite!(SledStorage::open);
}

mod redb {
    durable_suite!(RedbStorage::open);
}

/// With log files so small that most commits end an epoch (checkpoints all the time).
mod log_checkpointing {
    durable_suite!(LoggedStorage::open_tiny);
}

/// With log files that hold every test's writes (a reopen replays them).
mod log_replaying {
    durable_suite!(LoggedStorage::open_roomy);
}

/// Opens `path` again after the previous handle was dropped. sled releases its file lock from
/// a background thread shortly after the last handle goes, so a lock still held is retried
/// (bounded: a hang guard, not a timing assertion).
pub(super) fn reopen<S: SessionStorage>(open: Open<S>, path: &Path, sync: SyncMode) -> S {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match open(path, sync) {
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

/// Commits a batch opened with `sync`, syncs, and finds it again after a reopen.
fn durable_state_survives_a_reopen<S: SessionStorage>(open: Open<S>, sync: SyncMode) {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let batch = [
        saved("a", SessionExpiry::After(60)),
        subscribed("a", "x/+", QoS::AtLeastOnce),
        queued("a", 1, QoS::AtLeastOnce),
        queued("a", 2, QoS::ExactlyOnce),
        sent("a", 1, 7),
        saved("b", SessionExpiry::Never),
        retain_set("r", "1"),
    ];
    let expected = {
        let mut model = RecordingStorage::default();
        model.commit(&batch).unwrap();
        model.load().unwrap()
    };
    let mut storage = open(&path, sync).unwrap();
    storage.commit(&batch).unwrap();
    storage.sync().unwrap();
    drop(storage);
    assert_eq!(
        reopen(open, &path, SyncMode::EveryCommit).load().unwrap(),
        expected
    );
}

/// Sessions saved with owners, one saved again by another identity, find their owners again
/// after a reopen, opened with either sync mode (synced before the reopen).
fn durable_owners_survive_a_reopen<S: SessionStorage>(open: Open<S>) {
    for sync in [SyncMode::EveryCommit, SyncMode::Deferred] {
        let dir = temp_dir();
        let path = dir.path().join("db");
        let mut storage = open(&path, sync).unwrap();
        storage
            .commit(&contract::sessions_of_every_owner())
            .unwrap();
        let dave = StoredOwner::User(text("dave"));
        storage
            .commit(&[saved_by("c", SessionExpiry::Never, dave)])
            .unwrap();
        storage.sync().unwrap();
        drop(storage);
        let mut reopened = reopen(open, &path, SyncMode::EveryCommit);
        assert_eq!(
            contract::owners_of(&mut reopened),
            contract::owners_saved_and_replaced(),
            "{sync:?}"
        );
    }
}

/// A store written before owners were stored (its session record, or the log entry holding it,
/// without the trailing owner) loads unchanged, the session's owner not known.
/// `put_raw`: the engine's own raw write of a key.
fn durable_record_without_owner_loads_as_unbound<S: SessionStorage>(
    open: Open<S>,
    put_raw: fn(&mut S, &[u8], &[u8]),
) {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage = open(&path, SyncMode::EveryCommit).unwrap();
    let key = keyed::session_key(&text("old"));
    put_raw(&mut storage, &key, &record_without_owner());
    drop(storage);
    let loaded = reopen(open, &path, SyncMode::EveryCommit).load().unwrap();
    assert_eq!(loaded.sessions, [session_without_owner()]);
}

/// A reopened store's first commit (no `load` before it) sees the stored state: acks of
/// stored entries apply, sequence numbers at or below the stored queue's last are skipped.
fn durable_commit_before_load<S: SessionStorage>(open: Open<S>) {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let first = [
        saved("a", SessionExpiry::Never),
        queued("a", 1, QoS::AtLeastOnce),
        queued("a", 2, QoS::ExactlyOnce),
        queued("a", 3, QoS::ExactlyOnce),
        queued("a", 4, QoS::AtLeastOnce),
        sent("a", 1, 1),
        sent("a", 2, 2),
        SessionWrite::MessageDropped {
            client_id: text("a"),
            seq: 4,
        },
    ];
    let second = [
        acked(1),
        released(2),
        queued("a", 3, QoS::AtLeastOnce),
        sent("a", 3, 3),
        queued("a", 5, QoS::AtLeastOnce),
        sent("a", 2, 4),
    ];
    let mut model = RecordingStorage::default();
    model.commit(&first).unwrap();
    let expected_skips = model.commit(&second).unwrap();
    assert_eq!(expected_skips.skipped.len(), 2);
    let mut storage = open(&path, SyncMode::EveryCommit).unwrap();
    storage.commit(&first).unwrap();
    drop(storage);
    let mut storage = reopen(open, &path, SyncMode::EveryCommit);
    assert_eq!(storage.commit(&second).unwrap(), expected_skips);
    assert_eq!(storage.load().unwrap(), model.load().unwrap());
}

fn durable_skipped_writes_stay_skipped<S: SessionStorage>(open: Open<S>) {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let batch = [
        saved("a", SessionExpiry::Never),
        queued("a", 1, QoS::AtLeastOnce),
        acked(3),
        saved("b", SessionExpiry::Never),
        sent("a", 2, 1),
        subscribed("a", "t", QoS::AtLeastOnce),
    ];
    let mut model = RecordingStorage::default();
    let expected_skips = model.commit(&batch).unwrap();
    let mut storage = open(&path, SyncMode::EveryCommit).unwrap();
    assert_eq!(storage.commit(&batch).unwrap(), expected_skips);
    assert_eq!(expected_skips.skipped.len(), 2);
    drop(storage);
    assert_eq!(
        reopen(open, &path, SyncMode::EveryCommit).load().unwrap(),
        model.load().unwrap()
    );
}

fn assert_corrupt(loaded: Result<Recovered, StorageError>) {
    match loaded {
        Err(StorageError::Corrupt { reason }) => {
            assert!(reason.contains("\\x01a"), "names the key: {reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

fn durable_regular_file_is_not_a_store<S: SessionStorage + std::fmt::Debug>(open: Open<S>) {
    let dir = temp_dir();
    let path = dir.path().join("not-a-store");
    std::fs::write(&path, b"just a file").unwrap();
    match open(&path, SyncMode::EveryCommit) {
        Err(StorageError::Engine { reason, .. }) => {
            assert!(reason.contains(&*path.to_string_lossy()), "{reason}");
        }
        other => panic!("expected an engine error, got {other:?}"),
    }
}
