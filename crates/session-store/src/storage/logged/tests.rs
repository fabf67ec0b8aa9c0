//! What only the log engine does: a crash image (the files as they are after a commit
//! returned) loads what was committed, across many epochs and checkpoints; a torn last record
//! is not replayed.

use std::path::Path;

use codec::QoS;

use super::{LogSize, LoggedStorage};
use crate::SessionExpiry;
use crate::storage::contract_writes::{
    acked, qos2_received, qos2_released, queued, released, saved, sent, text,
};
use crate::storage::engine_tests::temp_dir;
use crate::storage::{RecordingStorage, SessionStorage, SessionWrite, SyncMode};

/// The batches of `n` QoS 2 flows in step: each batch stores one message, sends it, and moves
/// the earlier ones on (inbound id recorded and released, PUBREC, PUBCOMP).
fn qos2_flows(n: u16) -> Vec<Vec<SessionWrite>> {
    qos2_flows_in_flight(n, 1, &[])
}

/// Like [`qos2_flows`], with `window` flows waiting for their PUBREC at any time, and
/// `payload` as the messages' payload where it is not empty.
fn qos2_flows_in_flight(n: u16, window: u16, payload: &[u8]) -> Vec<Vec<SessionWrite>> {
    let mut batches = vec![vec![saved("a", SessionExpiry::Never)]];
    for id in 1..=n {
        let seq = u64::from(id);
        let mut message = queued("a", seq, QoS::ExactlyOnce);
        if !payload.is_empty() {
            message = with_payload(message, payload);
        }
        let mut batch = vec![message, sent("a", seq, id)];
        batch.push(qos2_received(id));
        if id > window {
            batch.push(released(id - window));
            batch.push(qos2_released(id - window));
        }
        if id > window + 1 {
            batch.push(acked(id - window - 1));
        }
        batches.push(batch);
    }
    batches
}

/// `write`, a `MessageQueued`, with `payload` as its message's payload.
fn with_payload(mut write: SessionWrite, payload: &[u8]) -> SessionWrite {
    let SessionWrite::MessageQueued { message, .. } = &mut write else {
        panic!("test: a queued message, not {write:?}");
    };
    message.payload = bytes::Bytes::copy_from_slice(payload);
    write
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

/// The crash image of a store holding 40 QoS 2 flows in one epoch, with byte `at` of its
/// active log flipped (`None`: the middle of what the epoch wrote); its directory and that
/// log's name.
fn damaged_image(dir: &Path, at: Option<u64>) -> (std::path::PathBuf, &'static str) {
    let path = dir.join("db");
    let mut storage = LoggedStorage::open_roomy(&path, SyncMode::EveryCommit).unwrap();
    commit_all(&mut storage, &qos2_flows(40));
    let active = storage.file_index();
    let at = at.unwrap_or(storage.files[active].end / 2);
    let image = dir.join("image");
    crash_image(storage, &path, &image);
    let log = image.join(super::LOG_FILES[active]);
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[usize::try_from(at).unwrap()] ^= 0x01;
    std::fs::write(&log, bytes).unwrap();
    (image, super::LOG_FILES[active])
}

/// The message of the refusal to open `image`.
fn refusal(image: &Path) -> String {
    match LoggedStorage::open_roomy(image, SyncMode::EveryCommit) {
        Err(error @ crate::storage::StorageError::Corrupt { .. }) => error.to_string(),
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("a damaged log was opened"),
    }
}

#[test]
fn a_damaged_record_with_intact_records_after_it_refuses_to_open() {
    let dir = temp_dir();
    let (image, log) = damaged_image(dir.path(), None);
    let message = refusal(&image);
    assert!(message.contains(log), "{message}");
    assert!(message.contains("is damaged at byte"), "{message}");
    assert!(message.contains("intact record(s) of epoch"), "{message}");
    // Nothing was changed: it refuses again, the same way.
    assert_eq!(refusal(&image), message);
}

#[test]
fn a_damaged_first_record_refuses_to_open() {
    let dir = temp_dir();
    let (image, log) = damaged_image(dir.path(), Some(20));
    let message = refusal(&image);
    assert!(message.contains(log), "{message}");
    assert!(message.contains("damaged at byte 16"), "{message}");
}

#[test]
fn a_log_written_before_headers_is_read() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage = LoggedStorage::open_roomy(&path, SyncMode::EveryCommit).unwrap();
    let batches = qos2_flows(20);
    let expected = commit_all(&mut storage, &batches);
    let active = storage.file_index();
    let image = dir.path().join("image");
    crash_image(storage, &path, &image);
    strip_headers(&image);
    let mut recovered = LoggedStorage::open_roomy(&image, SyncMode::EveryCommit).unwrap();
    assert_eq!(
        recovered.files[active].start, 0,
        "read as a file without a header"
    );
    assert_eq!(recovered.load().unwrap(), expected);
}

/// Rewrites both log files of `dir` in the format before headers (the same bytes from 0).
fn strip_headers(dir: &Path) {
    let header = usize::try_from(super::file::FILE_HEADER).unwrap();
    for name in super::LOG_FILES {
        let log = dir.join(name);
        let bytes = std::fs::read(&log).unwrap();
        let mut old = bytes[header..].to_vec();
        old.resize(bytes.len(), 0);
        std::fs::write(&log, old).unwrap();
    }
}

#[test]
fn logs_written_before_headers_get_theirs_as_their_epochs_restart() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let mut storage = LoggedStorage::open_tiny(&path, SyncMode::EveryCommit).unwrap();
    let batches = qos2_flows(60);
    let mut model = RecordingStorage::default();
    for batch in &batches[..30] {
        storage.commit(batch).unwrap();
        model.commit(batch).unwrap();
    }
    storage.checkpointer.wait().unwrap();
    let image = dir.path().join("image");
    crash_image(storage, &path, &image);
    strip_headers(&image);
    let mut upgraded = LoggedStorage::open_tiny(&image, SyncMode::EveryCommit).unwrap();
    for batch in &batches[30..] {
        upgraded.commit(batch).unwrap();
        model.commit(batch).unwrap();
    }
    assert!(
        upgraded
            .files
            .iter()
            .all(|f| f.start == super::file::FILE_HEADER)
    );
    upgraded.checkpointer.wait().unwrap();
    let again = dir.path().join("again");
    crash_image(upgraded, &image, &again);
    let mut recovered = LoggedStorage::open_tiny(&again, SyncMode::EveryCommit).unwrap();
    assert_eq!(recovered.load().unwrap(), model.load().unwrap());
}

#[test]
fn a_log_of_a_newer_format_is_refused() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    drop(LoggedStorage::open_roomy(&path, SyncMode::EveryCommit).unwrap());
    let log = path.join(super::LOG_FILES[0]);
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[8..12].copy_from_slice(&(super::file::FORMAT_VERSION + 1).to_be_bytes());
    let crc = crc32fast::hash(&bytes[..12]);
    bytes[12..16].copy_from_slice(&crc.to_be_bytes());
    std::fs::write(&log, bytes).unwrap();
    let message = refusal(&path);
    assert!(message.contains("written by a newer RingMQ"), "{message}");
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

fn open_sized(path: &Path, size: LogSize) -> LoggedStorage {
    LoggedStorage::open_with(path, SyncMode::EveryCommit, 1 << 20, size).unwrap()
}

/// The live inflight entries `pending` holds.
fn inflight(pending: &super::pending::Pending) -> usize {
    (pending.writes())
        .filter(|(key, value)| key[0] == crate::storage::keyed::INFLIGHT && value.is_some())
        .count()
}

/// The flows in progress that reach the B-tree with the epoch being checkpointed.
fn checkpointed_inflight(storage: &LoggedStorage) -> usize {
    inflight(
        storage
            .checkpointing
            .as_ref()
            .expect("an epoch being checkpointed"),
    )
}

/// Asserts that a crash image of `storage` (in `path`, files of `size`) loads what `model`
/// holds.
fn assert_recovers(
    mut storage: LoggedStorage,
    path: &Path,
    size: LogSize,
    model: &mut RecordingStorage,
) {
    let image = path.with_extension("image");
    storage.checkpointer.wait().unwrap();
    crash_image(storage, path, &image);
    let mut recovered = open_sized(&image, size);
    assert_eq!(recovered.load().unwrap(), model.load().unwrap());
}

/// Commits `n` QoS 2 flows, `window` in progress at any time, to a store with files of
/// `size`; with the flows in progress that reached the B-tree at the epochs' ends.
fn checkpointed_flows(
    path: &Path,
    size: LogSize,
    n: u16,
    window: u16,
) -> (LoggedStorage, RecordingStorage, usize) {
    let mut storage = open_sized(path, size);
    let mut model = RecordingStorage::default();
    let mut checkpointed = 0;
    for batch in qos2_flows_in_flight(n, window, &[7; 1000]) {
        let epoch = storage.epoch;
        assert_eq!(
            storage.commit(&batch).unwrap(),
            model.commit(&batch).unwrap()
        );
        if storage.epoch != epoch {
            checkpointed += checkpointed_inflight(&storage);
        }
    }
    (storage, model, checkpointed)
}

#[test]
fn a_file_grows_for_the_flows_in_progress_rather_than_checkpoint_them() {
    let dir = temp_dir();
    let fixed = LogSize::fixed(4 << 10);
    let growing = LogSize {
        bytes: 4 << 10,
        max_bytes: 256 << 10,
    };
    // Forty flows of 1,000-byte messages in progress at any time: more than half a first file
    // holds.
    let (_, _, stuck) = checkpointed_flows(&dir.path().join("fixed"), fixed, 600, 40);
    let path = dir.path().join("growing");
    let (storage, mut model, spared) = checkpointed_flows(&path, growing, 600, 40);
    assert!(storage.epoch > 2, "the flows end no epoch");
    let grown = storage.files.iter().map(|f| f.capacity).max().unwrap();
    assert!(grown > growing.bytes, "no file grew");
    assert!(grown <= growing.max_bytes, "a file grew past the most");
    assert!(
        spared * 4 < stuck,
        "flows in progress reaching the B-tree: {spared} with growing files, {stuck} without"
    );
    assert_recovers(storage, &path, growing, &mut model);
}

#[test]
fn long_lived_entries_do_not_grow_a_file() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let size = LogSize {
        bytes: 4 << 10,
        max_bytes: 256 << 10,
    };
    let mut storage = open_sized(&path, size);
    let mut model = RecordingStorage::default();
    // An offline session's queue: stored, never sent.
    let mut batches = vec![vec![saved("a", SessionExpiry::Never)]];
    for seq in 1..=200 {
        let write = queued("a", seq, QoS::AtLeastOnce);
        batches.push(vec![with_payload(write, &[7; 1000])]);
    }
    for batch in &batches {
        assert_eq!(storage.commit(batch).unwrap(), model.commit(batch).unwrap());
    }
    assert!(storage.epoch > 2, "the queue ends no epoch");
    assert!(
        storage.files.iter().all(|f| f.capacity == size.bytes),
        "a file grew for a queue nobody takes"
    );
    assert_recovers(storage, &path, size, &mut model);
}

#[test]
fn flows_in_progress_at_an_epoch_end_are_carried_over_not_checkpointed() {
    let dir = temp_dir();
    let path = dir.path().join("db");
    let size = LogSize::fixed(4 << 10);
    let mut storage = open_sized(&path, size);
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
    assert_eq!(
        checkpointed_inflight(&storage),
        0,
        "flows in progress reach the B-tree"
    );
    assert!(inflight(&storage.active) > 0, "no flow carried over");
    assert_recovers(storage, &path, size, &mut model);
}
