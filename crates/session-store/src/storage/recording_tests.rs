//! The model engine's own behaviour (the shared contract runs in `engine_tests.rs`).

use codec::QoS;

use super::*;
use crate::SessionExpiry;
use crate::storage::contract_tests::{acked, saved, subscribed};

#[test]
fn it_keeps_every_committed_write_and_nothing_of_a_refused_batch() {
    let mut storage = RecordingStorage::default();
    storage.commit(&[saved("a", SessionExpiry::Never)]).unwrap();
    let refused = [subscribed("a", "t", QoS::AtLeastOnce), acked(9)];
    assert!(storage.commit(&refused).is_err());
    assert_eq!(storage.committed(), [saved("a", SessionExpiry::Never)]);
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
    storage.set_failing(false);
    assert_eq!(storage.load().unwrap().sessions.len(), 1);
}
