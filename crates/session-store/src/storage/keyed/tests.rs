//! The planned writes of a batch over a plain in-memory store: each key once, and what a
//! batch writes adds up to the flows it describes.

use std::collections::{BTreeMap, HashSet};

use super::Keyed;
use super::kv::{KeyWrite, KvRead, Visit};
use crate::SessionExpiry;
use crate::storage::contract_tests::{acked, queued_and_sent, released, saved};
use crate::storage::{SessionWrite, StorageError};
use codec::QoS;

/// A store in a map.
#[derive(Default)]
struct MapKv(BTreeMap<Vec<u8>, Vec<u8>>);

impl KvRead for MapKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.0.get(key).cloned())
    }

    fn contains(&self, key: &[u8]) -> Result<bool, StorageError> {
        Ok(self.0.contains_key(key))
    }

    fn scan(&self, start: &[u8], prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError> {
        for (key, value) in self.0.range(start.to_vec()..) {
            if !key.starts_with(prefix) || !visit(key, value)? {
                break;
            }
        }
        Ok(())
    }

    fn scan_back(&self, prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError> {
        for (key, value) in self
            .0
            .iter()
            .rev()
            .filter(|(key, _)| key.starts_with(prefix))
        {
            if !visit(key, value)? {
                break;
            }
        }
        Ok(())
    }
}

impl MapKv {
    fn apply(&mut self, writes: Vec<KeyWrite>) {
        for write in writes {
            match write.value {
                Some(value) => self.0.insert(write.key, value),
                None => self.0.remove(&write.key),
            };
        }
    }
}

/// Plans `batch` over `kv`, checks that no key is written twice, and applies the writes.
fn commit(keyed: &mut Keyed, kv: &mut MapKv, batch: &[SessionWrite]) {
    let mut writes = Vec::new();
    let committed = keyed.plan(kv, batch, &mut writes).unwrap();
    assert!(committed.skipped.is_empty(), "{:?}", committed.skipped);
    let mut keys = HashSet::new();
    for write in &writes {
        assert!(
            keys.insert(write.key.clone()),
            "{:?} written twice",
            write.key
        );
    }
    kv.apply(writes);
}

#[test]
fn an_inflight_key_is_written_once_in_a_batch_that_ends_its_flow_and_starts_another() {
    let (mut keyed, mut kv) = (Keyed::default(), MapKv::default());
    let first = [
        saved("a", SessionExpiry::Never),
        queued_and_sent("a", 1, 7, QoS::ExactlyOnce),
        queued_and_sent("a", 2, 8, QoS::ExactlyOnce),
        queued_and_sent("a", 5, 9, QoS::AtLeastOnce),
    ];
    commit(&mut keyed, &mut kv, &first);
    // 7: released and completed in this batch, then sent again; 8: completed and sent again;
    // 9: acknowledged (its entry of the batch before deleted) and sent again.
    let second = [
        released(7),
        acked(7),
        queued_and_sent("a", 3, 7, QoS::AtLeastOnce),
        released(8),
        acked(8),
        queued_and_sent("a", 4, 8, QoS::ExactlyOnce),
        released(8),
        acked(9),
        queued_and_sent("a", 6, 9, QoS::AtLeastOnce),
    ];
    commit(&mut keyed, &mut kv, &second);
    let inflight: Vec<&Vec<u8>> =
        kv.0.keys()
            .filter(|key| key[0] == super::INFLIGHT)
            .collect();
    assert_eq!(inflight.len(), 3, "the new flows of 7, 8 and 9");
    let mut reloaded = Keyed::default();
    let sessions = reloaded.load(&kv, usize::MAX).unwrap().recovered.sessions;
    let ids: Vec<u16> = sessions[0]
        .inflight
        .iter()
        .map(|(id, _)| id.get())
        .collect();
    assert_eq!(ids, [7, 8, 9]);
}
