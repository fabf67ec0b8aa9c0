//! What only the log engine does: a crash image (the files as they are after a commit
//! returned) loads what was committed, across many epochs and checkpoints; a torn last record
//! is not replayed.

use std::path::Path;

use codec::QoS;

use super::LoggedStorage;
use crate::SessionExpiry;
use crate::storage::contract_tests::{
    acked, qos2_received, qos2_released, queued, released, saved, sent, text,
};
use crate::storage::engine_tests::temp_dir;
use crate::storage::{RecordingStorage, SessionStorage, SessionWrite, SyncMode};

/// The batches of `n` QoS 2 flows in step: each batch stores one message, sends it, and moves
/// the earlier ones on (inbound id recorded and released, PUBREC, PUBCOMP).
fn qos2_flows(n: u16) -> Vec<Vec<SessionWrite>> {
    let mut batches = vec![vec![saved("a", SessionExpiry::Never)]];
    for id in 1..=n {
        let seq = u64::from(id);
        let mut batch = vec![queued("a", seq, QoS::ExactlyOnce), sent("a", seq, id)];
        batch.push(qos2_received(id));
        if id > 1 {
            batch.push(released(id - 1));
            batch.push(qos2_released(id - 1));
        }
        if id > 2 {
            batch.push(acked(id - 2));
        }
        batches.push(batch);
    }
    batches
}

/// Copies the store's files in `from` to `to` as they are now (what a crash at this moment
/// leaves), then drops `storage`.
fn crash_image(storage: LoggedStorage, from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    drop(storage);
}

/// Commits `batches` to the engine and the model; the model's state.
fn commit_all(
    storage: &mut LoggedStorage,
    batches: &[Vec<SessionWrite>],
) -> crate::storage::Recovered {
    let mut model = RecordingStorage::default();
    for batch in batches {
        assert_eq!(storage.commit(batch).unwrap(), model.commit(batch).unwrap());
    }
    model.load().unwrap()
}

#[test]
fn a_crash_image_loads_every_committed_batch_across_checkpoints() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage = LoggedStorage::open_tiny(&path, SyncMode::EveryCommit).unwrap();
    let expected = commit_all(&mut storage, &qos2_flows(40));
    storage.checkpointer.wait().unwrap();
    let image = dir.path().join("image");
    crash_image(storage, &path, &image);
    let mut recovered = LoggedStorage::open_tiny(&image, SyncMode::EveryCommit).unwrap();
    assert_eq!(recovered.load().unwrap(), expected);
}

#[test]
fn a_torn_last_record_is_not_replayed() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage = LoggedStorage::open_roomy(&path, SyncMode::EveryCommit).unwrap();
    let batches = qos2_flows(6);
    let (last, before) = batches.split_last().unwrap();
    let expected = commit_all(&mut storage, before);
    storage.commit(last).unwrap();
    let active = storage.file_index();
    let torn_at = storage.files[active].end - 1;
    let image = dir.path().join("image");
    crash_image(storage, &path, &image);
    let log = image.join(super::LOG_FILES[active]);
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[usize::try_from(torn_at).unwrap()] ^= 0xff;
    std::fs::write(&log, bytes).unwrap();
    let mut recovered = LoggedStorage::open_roomy(&image, SyncMode::EveryCommit).unwrap();
    assert_eq!(recovered.load().unwrap(), expected);
}

#[test]
fn a_flow_completed_between_checkpoints_never_reaches_the_b_tree() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage = LoggedStorage::open_roomy(&path, SyncMode::EveryCommit).unwrap();
    let mut batches = qos2_flows(3);
    batches.push(vec![released(3), qos2_released(3), acked(2)]);
    batches.push(vec![acked(3)]);
    commit_all(&mut storage, &batches);
    let written: Vec<_> = storage.active.writes().map(|(key, _)| key).collect();
    assert_eq!(written, [crate::storage::keyed::session_key(&text("a"))]);
}

#[test]
fn flows_in_progress_at_an_epoch_end_are_carried_over_not_checkpointed() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage =
        LoggedStorage::open_with(&path, SyncMode::EveryCommit, 1 << 20, 4 << 10).unwrap();
    let mut model = RecordingStorage::default();
    for batch in qos2_flows(200) {
        assert_eq!(
            storage.commit(&batch).unwrap(),
            model.commit(&batch).unwrap()
        );
        if storage.epoch > 2 {
            break;
        }
    }
    assert!(storage.epoch > 2, "the flows end no epoch");
    let inflight = |pending: &super::pending::Pending| {
        (pending.writes())
            .filter(|(key, value)| key[0] == crate::storage::keyed::INFLIGHT && value.is_some())
            .count()
    };
    let checkpointing = storage
        .checkpointing
        .clone()
        .expect("an epoch being checkpointed");
    assert_eq!(
        inflight(&checkpointing),
        0,
        "flows in progress reach the B-tree"
    );
    assert!(inflight(&storage.active) > 0, "no flow carried over");
    let image = dir.path().join("image");
    storage.checkpointer.wait().unwrap();
    crash_image(storage, &path, &image);
    let mut recovered =
        LoggedStorage::open_with(&image, SyncMode::EveryCommit, 1 << 20, 4 << 10).unwrap();
    assert_eq!(recovered.load().unwrap(), model.load().unwrap());
}
