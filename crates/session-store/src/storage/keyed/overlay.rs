//! The key writes a batch has planned so far, read through before the store: a write later in
//! the batch sees what earlier ones did. A key put in this batch that the store is known not to
//! hold is dropped again, not deleted, if the batch deletes it (a message queued, sent and
//! acknowledged in one batch writes nothing).

use std::collections::HashMap;

use super::kv::{KeyWrite, KvRead};
use crate::InflightState;
use crate::storage::encoding;
use crate::storage::{StorageError, StoredMessage};

/// A value planned (or read): encoded only when it is written, so a message queued and sent in
/// one batch is never encoded as queued, and one also acknowledged in it never at all.
#[derive(Debug)]
pub(in crate::storage) enum Value<'b> {
    /// Encoded bytes (read from the store, or small values encoded at once).
    Encoded(Vec<u8>),
    /// A queued message, borrowed from the batch.
    Queued(&'b StoredMessage),
    /// An inflight entry: its send number and state.
    Inflight(u64, InflightState<StoredMessage>),
}

impl Value<'_> {
    fn encode(self) -> Vec<u8> {
        match self {
            Self::Encoded(bytes) => bytes,
            Self::Queued(message) => encoding::encode_message(message),
            Self::Inflight(send, state) => encoding::encode_inflight(send, &state),
        }
    }
}

/// A planned key write.
#[derive(Debug)]
struct Planned<'b> {
    /// The value (`None`: delete).
    value: Option<Value<'b>>,
    /// Whether the store held no value under the key before the batch.
    absent_before: bool,
}

/// The planned writes of a batch over the store's reads.
///
/// Planned writes are hashed, not ordered: keys share long prefixes (tag and client id), so a
/// tree's comparisons cost more than hashing; the rare ordered questions (a prefix's keys, its
/// last key) scan the planned writes, and an engine that wants the writes in key order sorts
/// them once.
pub(in crate::storage) struct Overlay<'a, 'b, K> {
    kv: &'a K,
    planned: HashMap<Vec<u8>, Planned<'b>, ahash::RandomState>,
}

impl<'a, 'b, K: KvRead> Overlay<'a, 'b, K> {
    /// Nothing planned yet over `kv`, with room for `writes` planned writes (a batch plans
    /// about one per write: sized once, not grown step by step through a large group commit).
    pub(in crate::storage) fn new(kv: &'a K, writes: usize) -> Self {
        Self {
            kv,
            planned: HashMap::with_capacity_and_hasher(writes, ahash::RandomState::default()),
        }
    }

    /// Plans `value` under `key`; `absent_before`: the store is known to hold nothing there.
    pub(in crate::storage) fn put(&mut self, key: Vec<u8>, value: Value<'b>, absent_before: bool) {
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

    /// The value under `key` once the planned writes are applied, and plans deleting it (no copy
    /// of a value planned in this batch).
    pub(in crate::storage) fn take(
        &mut self,
        key: &[u8],
    ) -> Result<Option<Value<'b>>, StorageError> {
        let value = match self.planned.get_mut(key) {
            Some(planned) if planned.absent_before => {
                self.planned.remove(key).and_then(|p| p.value)
            }
            Some(planned) => planned.value.take(),
            None => {
                let value = self.kv.get(key)?;
                if value.is_some() {
                    self.delete(key.to_vec());
                }
                value.map(Value::Encoded)
            }
        };
        Ok(value)
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

    /// The planned writes under `prefix`, in key order.
    fn planned_under(
        &self,
        prefix: &[u8],
    ) -> impl DoubleEndedIterator<Item = (&Vec<u8>, &Planned<'b>)> {
        let mut under: Vec<(&Vec<u8>, &Planned<'b>)> = (self.planned.iter())
            .filter(|(key, _)| key.starts_with(prefix))
            .collect();
        under.sort_unstable_by(|a, b| a.0.cmp(b.0));
        under.into_iter()
    }

    /// The planned writes, in no particular order (each key once).
    pub(in crate::storage) fn into_writes(self) -> Vec<KeyWrite> {
        (self.planned.into_iter())
            .map(|(key, planned)| KeyWrite {
                key,
                value: planned.value.map(Value::encode),
                absent_before: planned.absent_before,
            })
            .collect()
    }
}
