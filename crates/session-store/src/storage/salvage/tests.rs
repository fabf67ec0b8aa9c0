//! Check and salvage on every durable engine: a sound store is reported sound and salvaged
//! whole; a value that does not decode is dropped and counted, the rest kept; sled on a
//! damaged directory never panics out of `open` (sled itself takes a damaged segment for the
//! end of its log and opens what comes before it: a known limit, docs/persistence.md).

use std::path::Path;

use super::*;
use crate::storage::engine_tests::{Open, temp_dir};
use crate::storage::random_writes::Writes;
use crate::storage::{
    LoggedStorage, RecordingStorage, Recovered, RedbStorage, SessionStorage, SledStorage, SyncMode,
};

/// Fills a store of `open` in `dir` with 80 random batches; what it loads.
fn filled<S: SessionStorage>(open: Open<S>, dir: &Path, seed: u64) -> (S, Recovered) {
    let mut storage = open(dir, SyncMode::EveryCommit).unwrap();
    storage.load().unwrap();
    let mut model = RecordingStorage::default();
    let mut writes = Writes::new(seed);
    for _ in 0..80 {
        let batch = writes.batch(&model.load().unwrap());
        model.commit(&batch).unwrap();
        storage.commit(&batch).unwrap();
    }
    let loaded = storage.load().unwrap();
    assert_eq!(loaded, model.load().unwrap());
    (storage, loaded)
}

fn sound_store_round_trips<S: SessionStorage>(open: Open<S>, engine: StoreEngine) {
    let dir = temp_dir();
    let store = dir.path().join("store");
    let (storage, loaded) = filled(open, &store, 11);
    drop(storage);
    assert_eq!(detect_engine(&store).unwrap(), engine);
    let report = check_store(&store).unwrap();
    assert!(!report.damaged, "{report}");
    assert_eq!(report.dropped_keys, 0, "{report}");
    assert_eq!(report.opens, Ok(StoreCounts::of(&loaded)), "{report}");
    assert_eq!(report.intact, StoreCounts::of(&loaded), "{report}");
    let into = dir.path().join("salvaged");
    let report = salvage_store(&store, &into).unwrap();
    assert!(report.opens.is_ok(), "{report}");
    let mut salvaged = open(&into, SyncMode::EveryCommit).unwrap();
    assert_eq!(salvaged.load().unwrap(), loaded);
}

#[test]
fn a_sound_store_of_every_engine_is_reported_sound_and_salvaged_whole() {
    sound_store_round_trips(LoggedStorage::open, StoreEngine::Log);
    sound_store_round_trips(LoggedStorage::open_tiny, StoreEngine::Log);
    sound_store_round_trips(RedbStorage::open, StoreEngine::Redb);
    sound_store_round_trips(SledStorage::open, StoreEngine::Sled);
}

/// A queued message's key of the first stored session that has one, with a value that does
/// not decode.
fn bad_queued_key(loaded: &Recovered) -> Vec<u8> {
    let session = loaded
        .sessions
        .iter()
        .find(|s| !s.queued.is_empty())
        .unwrap();
    crate::storage::keyed::queued_key(&session.client_id, session.queued[0].0)
}

#[test]
fn a_value_that_does_not_decode_is_dropped_and_the_rest_salvaged() {
    let dir = temp_dir();
    let store = dir.path().join("store");
    let (storage, loaded) = filled(RedbStorage::open, &store, 12);
    storage.put_raw(&bad_queued_key(&loaded), b"\xff not a message");
    drop(storage);
    let report = check_store(&store).unwrap();
    assert!(report.damaged && report.opens.is_err(), "{report}");
    assert_eq!(report.dropped_keys, 1, "{report}");
    let expected = StoreCounts::of(&loaded);
    assert_eq!(report.intact.queued, expected.queued - 1, "{report}");
    let into = dir.path().join("salvaged");
    let report = salvage_store(&store, &into).unwrap();
    assert_eq!(report.opens.map(|c| c.queued), Ok(expected.queued - 1));
}

#[test]
fn salvage_never_writes_into_the_store_or_a_full_directory() {
    let dir = temp_dir();
    let store = dir.path().join("store");
    drop(filled(RedbStorage::open, &store, 13));
    let inside = salvage_store(&store, &store.join("new")).unwrap_err();
    assert!(inside.to_string().contains("inside the store"), "{inside}");
    let full = dir.path().join("full");
    std::fs::create_dir_all(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    let refused = salvage_store(&store, &full).unwrap_err();
    assert!(refused.to_string().contains("not empty"), "{refused}");
    let nothing = check_store(dir.path()).unwrap_err();
    assert!(nothing.to_string().contains("holds no store"), "{nothing}");
}

#[test]
fn sled_on_a_damaged_directory_never_panics_out_of_open() {
    let dir = temp_dir();
    let store = dir.path().join("store");
    drop(filled(SledStorage::open, &store, 14));
    let db = store.join("db");
    let mut bytes = std::fs::read(&db).unwrap();
    for byte in bytes.iter_mut().take(4096).skip(16) {
        *byte ^= 0x5a;
    }
    std::fs::write(&db, bytes).unwrap();
    let opened = std::panic::catch_unwind(|| SledStorage::open(&store, SyncMode::EveryCommit));
    let opened = opened.expect("sled's panic is caught inside open");
    let loaded = opened.and_then(|mut s| s.load());
    if let Err(e) = loaded {
        assert!(e.to_string().contains(&*store.to_string_lossy()), "{e}");
    }
    let report = check_store(&store).unwrap();
    assert_eq!(report.engine, StoreEngine::Sled);
}
