//! The model engine's own behaviour (the shared contract runs in `engine_tests.rs`).

use codec::QoS;

use super::*;
use crate::SessionExpiry;
use crate::storage::contract_writes::{acked, saved, subscribed};

#[test]
fn it_keeps_every_committed_write_skipped_ones_included() {
    let mut storage = RecordingStorage::default();
    storage.commit(&[saved("a", SessionExpiry::Never)]).unwrap();
    let batch = [subscribed("a", "t", QoS::AtLeastOnce), acked(9)];
    assert_eq!(storage.commit(&batch).unwrap().skipped.len(), 1);
    let mut expected = vec![saved("a", SessionExpiry::Never)];
    expected.extend(batch);
    assert_eq!(storage.committed(), expected);
}

#[test]
fn a_failing_engine_keeps_what_was_committed_before() {
    let mut storage = RecordingStorage::default();
    storage.commit(&[saved("a", SessionExpiry::Never)]).unwrap();
    storage.set_failing(true);
    assert!(matches!(
        storage.commit(&[saved("b", SessionExpiry::Never)]),
        Err(StorageError::Engine { .. })
    ));
    assert!(storage.sync().is_err());
    storage.set_failing(false);
    assert_eq!(storage.load().unwrap().sessions.len(), 1);
}
