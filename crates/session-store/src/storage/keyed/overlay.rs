//! The key writes a batch has planned so far, read through before the store: a write later in
//! the batch sees what earlier ones did. A key put in this batch that the store is known not to
//! hold is dropped again, not deleted, if the batch deletes it (a message queued, sent and
//! acknowledged in one batch writes nothing).

use std::collections::BTreeMap;
use std::ops::Bound;

use super::kv::{KeyWrite, KvRead, prefix_end};
use crate::storage::StorageError;

/// A planned key write.
#[derive(Debug)]
struct Planned {
    /// The value (`None`: delete).
    value: Option<Vec<u8>>,
    /// Whether the store held no value under the key before the batch.
    absent_before: bool,
}

/// The planned writes of a batch over the store's reads.
pub(in crate::storage) struct Overlay<'a, K> {
    kv: &'a K,
    planned: BTreeMap<Vec<u8>, Planned>,
}

impl<'a, K: KvRead> Overlay<'a, K> {
    /// Nothing planned yet over `kv`.
    pub(in crate::storage) fn new(kv: &'a K) -> Self {
        Self {
            kv,
            planned: BTreeMap::new(),
        }
    }

    /// Plans `value` under `key`; `absent_before`: the store is known to hold nothing there.
    pub(in crate::storage) fn put(&mut self, key: Vec<u8>, value: Vec<u8>, absent_before: bool) {
        let planned = self.planned.entry(key).or_insert(Planned {
            value: None,
            absent_before,
        });
        planned.value = Some(value);
    }

    /// Plans deleting `key`.
    pub(in crate::storage) fn delete(&mut self, key: Vec<u8>) {
        match self.planned.get_mut(&key) {
            Some(planned) if planned.absent_before => {
                self.planned.remove(&key);
            }
            Some(planned) => planned.value = None,
            None => {
                let planned = Planned {
                    value: None,
                    absent_before: false,
                };
                self.planned.insert(key, planned);
            }
        }
    }

    /// The value under `key` once the planned writes are applied.
    pub(in crate::storage) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        match self.planned.get(key) {
            Some(planned) => Ok(planned.value.clone()),
            None => self.kv.get(key),
        }
    }

    /// Whether `key` has a value once the planned writes are applied.
    pub(in crate::storage) fn contains(&self, key: &[u8]) -> Result<bool, StorageError> {
        match self.planned.get(key) {
            Some(planned) => Ok(planned.value.is_some()),
            None => self.kv.contains(key),
        }
    }

    /// Plans deleting every key that starts with `prefix`.
    pub(in crate::storage) fn delete_prefix(&mut self, prefix: &[u8]) -> Result<(), StorageError> {
        let mut keys = Vec::new();
        self.kv.scan(prefix, prefix, &mut |key, _| {
            keys.push(key.to_vec());
            Ok(true)
        })?;
        keys.extend(self.planned_under(prefix).map(|(key, _)| key.clone()));
        for key in keys {
            self.delete(key);
        }
        Ok(())
    }

    /// The last key starting with `prefix` once the planned writes are applied.
    pub(in crate::storage) fn last_key(
        &self,
        prefix: &[u8],
    ) -> Result<Option<Vec<u8>>, StorageError> {
        let planned = self
            .planned_under(prefix)
            .rev()
            .find(|(_, p)| p.value.is_some())
            .map(|(key, _)| key.clone());
        let mut stored = None;
        self.kv.scan_back(prefix, &mut |key, _| {
            let deleted = self.planned.get(key).is_some_and(|p| p.value.is_none());
            if !deleted {
                stored = Some(key.to_vec());
            }
            Ok(deleted)
        })?;
        Ok(planned.max(stored))
    }

    fn planned_under(
        &self,
        prefix: &[u8],
    ) -> impl DoubleEndedIterator<Item = (&Vec<u8>, &Planned)> {
        let end = match prefix_end(prefix) {
            Some(end) => Bound::Excluded(end),
            None => Bound::Unbounded,
        };
        self.planned
            .range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), end))
    }

    /// The planned writes, in key order.
    pub(in crate::storage) fn into_writes(self) -> Vec<KeyWrite> {
        (self.planned.into_iter())
            .map(|(key, planned)| (key, planned.value))
            .collect()
    }
}
