//! The key writes a batch has planned so far, read through before the store: a write later in
//! the batch sees what earlier ones did. A key put in this batch that the store is known not to
//! hold is dropped again, not deleted, if the batch deletes it (a message queued, sent and
//! acknowledged in one batch writes nothing).

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::hash_filter::HashFilter;
use super::kv::{KeyWrite, KvRead};
use crate::InflightState;
use crate::storage::encoding;
use crate::storage::{SessionWrite, StorageError, StoredMessage};

/// A value planned (or read): encoded only when it is written, so a message queued and sent in
/// one batch is never encoded as queued, and one also acknowledged in it never at all.
#[derive(Debug)]
pub(in crate::storage) enum Value {
    /// Encoded bytes (read from the store, or small values encoded at once).
    Encoded(Vec<u8>),
    /// The message of the batch's write at this index (`MessageQueued`, `RetainSet`).
    Queued(usize),
    /// An inflight entry: its send number and state, its message where the batch or a read
    /// left it (no copy of a message queued in this batch).
    Inflight(u64, InflightState<MessageAt>),
}

/// Where the message of a planned inflight entry is.
#[derive(Debug)]
pub(in crate::storage) enum MessageAt {
    /// In the batch's write at this index (`MessageQueued`, `MessageSent`).
    Batch(usize),
    /// Read back from the store (boxed: a planned write stays small, so the map of a large
    /// batch moves little).
    Read(Box<StoredMessage>),
}

impl MessageAt {
    /// The message, out of `batch` if it is there.
    pub(in crate::storage) fn get<'a>(&'a self, batch: &'a [SessionWrite]) -> &'a StoredMessage {
        match self {
            Self::Batch(index) => message_of(batch, *index),
            Self::Read(message) => message,
        }
    }
}

impl Value {
    fn encode(self, batch: &[SessionWrite]) -> Vec<u8> {
        match self {
            Self::Encoded(bytes) => bytes,
            Self::Queued(index) => encoding::encode_message(message_of(batch, index)),
            Self::Inflight(send, state) => {
                encoding::encode_inflight(send, &state.as_ref().map(|at| at.get(batch)))
            }
        }
    }
}

/// The message the batch's write at `index` carries.
pub(in crate::storage) fn message_of(batch: &[SessionWrite], index: usize) -> &StoredMessage {
    match &batch[index] {
        SessionWrite::MessageQueued { message, .. }
        | SessionWrite::MessageSent { message, .. }
        | SessionWrite::RetainSet { message, .. } => message,
        other => panic!("invariant: a planned message names a write with one, not {other:?}"),
    }
}

/// A planned key write.
#[derive(Debug)]
pub(in crate::storage) struct Planned {
    /// The value (`None`: delete).
    value: Option<Value>,
    /// Whether the store held no value under the key before the batch.
    absent_before: bool,
    /// Whether the table finds it by key (see [`PlannedAt`] for the writes it does not).
    indexed: bool,
}

/// Where a batch planned the write of an inflight entry's key, kept by the index with the
/// entry: its later writes in the batch find it there instead of hashing the key. Only a
/// planned deletion of such a key is also in the table (a new entry under the same packet id,
/// later in the batch, finds it by key); its puts are not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(in crate::storage) struct PlannedAt {
    /// The batch's number (0: none; it never wraps, so a flight that waits for years is never
    /// taken for one of a later batch).
    batch: u64,
    /// The write's position in it.
    at: u32,
}

/// A key as planned, in the order first planned.
#[derive(Debug)]
struct Slot {
    key: Vec<u8>,
    /// `None` once dropped again (a key the store does not hold, deleted in the same batch).
    planned: Option<Planned>,
}

/// The planned writes of a batch by key: kept between batches (emptied, its room kept), so a
/// large group commit does not fill fresh memory every time. Its room is that of the largest
/// group commit so far.
///
/// The writes lie in a vector in planning order; the hash table holds only their positions
/// (4 bytes each), so a group commit of tens of thousands of writes probes a table that stays
/// in cache, not one of 70-byte buckets.
#[derive(Debug, Default)]
pub(in crate::storage) struct PlannedWrites {
    by_key: HashTable<u32>,
    slots: Vec<Slot>,
    hasher: foldhash::fast::RandomState,
    /// The number of the batch being planned (0 before the first).
    batch: u64,
    /// The hashes of the inflight keys entered in the table (their planned deletions): a new
    /// inflight entry looks for one in the table only when its hash is here.
    tracked_in_table: HashFilter,
}

impl PlannedWrites {
    /// Empties it, with room for `writes` keys.
    fn reset(&mut self, writes: usize) {
        self.batch += 1;
        self.by_key.clear();
        self.tracked_in_table.clear();
        self.slots.clear();
        let (slots, hasher) = (&self.slots, &self.hasher);
        (self.by_key).reserve(writes, |&at| hasher.hash_one(&slots[at as usize].key));
        self.slots.reserve(writes);
    }

    /// The position of `key`'s planned write (`Ok`), or the key's hash to plan it under
    /// (`Err`).
    fn find(&self, key: &[u8]) -> Result<usize, u64> {
        let hash = self.hasher.hash_one(key);
        self.find_hashed(hash, key).ok_or(hash)
    }

    /// The position of `key` (of `hash`) in the table, if it is there.
    fn find_hashed(&self, hash: u64, key: &[u8]) -> Option<usize> {
        let slots = &self.slots;
        (self.by_key)
            .find(hash, |&at| slots[at as usize].key == key)
            .map(|&at| at as usize)
    }

    /// The position of a tracked key's planned write in the table (a deletion), if it has one
    /// there; most keys are ruled out without a probe.
    fn tracked_position(&self, key: &[u8]) -> Option<usize> {
        let hash = self.hasher.hash_one(key);
        if !self.tracked_in_table.may_contain(hash) {
            return None;
        }
        self.find_hashed(hash, key)
    }

    /// The position of `key`'s planned write, if it has one.
    fn position(&self, key: &[u8]) -> Option<usize> {
        self.find(key).ok()
    }

    fn get(&self, key: &[u8]) -> Option<&Planned> {
        self.position(key)
            .and_then(|at| self.slots[at].planned.as_ref())
    }

    fn at_mut(&mut self, at: usize) -> &mut Planned {
        (self.slots[at].planned.as_mut())
            .expect("invariant: a position in the table names a live planned write")
    }

    /// The live planned write `known` names, if it is of this batch.
    fn tracked(&mut self, known: PlannedAt) -> Option<&mut Planned> {
        if known.batch != self.batch {
            return None;
        }
        (self.slots.get_mut(known.at as usize)).and_then(|slot| slot.planned.as_mut())
    }

    /// Plans `planned` under `key`, which has no planned write, without entering it in the
    /// table; where it is.
    fn push_tracked(&mut self, key: Vec<u8>, planned: Planned) -> PlannedAt {
        let at = self.next_position();
        self.slots.push(Slot {
            key,
            planned: Some(planned),
        });
        PlannedAt {
            batch: self.batch,
            at,
        }
    }

    /// Enters the tracked planned write at `at` in the table, if it is not there yet.
    fn index(&mut self, at: usize) {
        let Some(planned) = self.slots[at].planned.as_mut() else {
            return;
        };
        if std::mem::replace(&mut planned.indexed, true) {
            return;
        }
        let hash = self.hasher.hash_one(&self.slots[at].key);
        self.tracked_in_table.insert(hash);
        self.enter(hash, at);
    }

    fn next_position(&self) -> u32 {
        u32::try_from(self.slots.len())
            .expect("invariant: a batch plans fewer than 2^32 key writes")
    }

    /// Plans `planned` under `key` (of `hash`), which has no planned write.
    fn insert(&mut self, hash: u64, key: Vec<u8>, planned: Planned) {
        let at = self.next_position();
        // The slot is moved in before the table is written: a copy of it from the stack
        // waiting behind the table's stores (cache misses in a table of tens of thousands of
        // positions) was a tenth of the store thread's time under QoS 2.
        self.slots.push(Slot {
            key,
            planned: Some(planned),
        });
        self.enter(hash, at as usize);
    }

    /// Enters the position `at` (its key of `hash`) in the table.
    fn enter(&mut self, hash: u64, at: usize) {
        let (slots, hasher) = (&self.slots, &self.hasher);
        (self.by_key).insert_unique(hash, at as u32, |&other| {
            hasher.hash_one(&slots[other as usize].key)
        });
    }

    /// Drops the planned write at `at` (as if never planned); what it planned.
    fn remove_at(&mut self, at: usize) -> Planned {
        let indexed = self.slots[at].planned.as_ref().is_some_and(|p| p.indexed);
        let hash = self.hasher.hash_one(&self.slots[at].key);
        if indexed && let Ok(entry) = self.by_key.find_entry(hash, |&other| other as usize == at) {
            entry.remove();
        }
        (self.slots[at].planned.take())
            .expect("invariant: a position in the table names a live planned write")
    }

    /// Moves the live planned writes out, in planning order, and empties it.
    fn drain(&mut self) -> impl Iterator<Item = (Vec<u8>, Planned)> + '_ {
        self.by_key.clear();
        (self.slots.drain(..)).filter_map(|slot| Some((slot.key, slot.planned?)))
    }

    /// The live planned writes, in planning order.
    fn iter(&self) -> impl Iterator<Item = (&Vec<u8>, &Planned)> {
        (self.slots.iter()).filter_map(|slot| Some((&slot.key, slot.planned.as_ref()?)))
    }
}

/// The planned writes of a batch over the store's reads.
///
/// Planned writes are hashed, not ordered: keys share long prefixes (tag and client id), so a
/// tree's comparisons cost more than hashing; the rare ordered questions (a prefix's keys, its
/// last key) scan the planned writes, and an engine that wants the writes in key order sorts
/// them once.
pub(in crate::storage) struct Overlay<'a, K> {
    kv: &'a K,
    planned: &'a mut PlannedWrites,
}

impl<'a, K: KvRead> Overlay<'a, K> {
    /// Nothing planned yet over `kv`, in `planned`, with room for `writes` planned writes (a
    /// batch plans about one per write: sized once, not grown step by step).
    pub(in crate::storage) fn new(
        kv: &'a K,
        planned: &'a mut PlannedWrites,
        writes: usize,
    ) -> Self {
        planned.reset(writes);
        Self { kv, planned }
    }

    /// Plans `value` under `key`; `absent_before`: the store is known to hold nothing there.
    pub(in crate::storage) fn put(&mut self, key: Vec<u8>, value: Value, absent_before: bool) {
        match self.planned.find(&key) {
            Ok(at) => self.planned.at_mut(at).value = Some(value),
            Err(hash) => self.planned.insert(
                hash,
                key,
                Planned {
                    value: Some(value),
                    absent_before,
                    indexed: true,
                },
            ),
        }
    }

    /// Plans `value` under an inflight entry's key (`key` makes it), which this batch planned
    /// at `known` if it did; where it is planned now (see [`PlannedAt`]). A key the batch has
    /// not planned through `known` is looked up in the table only when `absent_before` (a new
    /// entry: a deletion of the id's previous entry may be planned there).
    pub(in crate::storage) fn put_tracked(
        &mut self,
        known: PlannedAt,
        key: impl FnOnce() -> Vec<u8>,
        value: Value,
        absent_before: bool,
    ) -> PlannedAt {
        if let Some(planned) = self.planned.tracked(known) {
            planned.value = Some(value);
            return known;
        }
        let key = key();
        let found = if absent_before {
            self.planned.tracked_position(&key)
        } else {
            None
        };
        if let Some(at) = found {
            self.planned.at_mut(at).value = Some(value);
            return PlannedAt {
                batch: self.planned.batch,
                at: at as u32,
            };
        }
        let planned = Planned {
            value: Some(value),
            absent_before,
            indexed: false,
        };
        self.planned.push_tracked(key, planned)
    }

    /// Plans deleting an inflight entry's key (`key` makes it), which this batch planned at
    /// `known` if it did; the deletion is entered in the table (see [`PlannedAt`]).
    pub(in crate::storage) fn delete_tracked(
        &mut self,
        known: PlannedAt,
        key: impl FnOnce() -> Vec<u8>,
    ) {
        let at = known.at as usize;
        match self.planned.tracked(known) {
            Some(planned) if planned.absent_before => {
                self.planned.remove_at(at);
            }
            Some(planned) => {
                planned.value = None;
                self.planned.index(at);
            }
            None => {
                // Every write of the key in this batch went through `known`: none is planned.
                let key = key();
                debug_assert!(
                    self.planned.position(&key).is_none(),
                    "{key:?} planned twice"
                );
                let hash = self.planned.hasher.hash_one(&key);
                self.planned.tracked_in_table.insert(hash);
                let planned = Planned {
                    value: None,
                    absent_before: false,
                    indexed: true,
                };
                self.planned.insert(hash, key, planned);
            }
        }
    }

    /// Plans deleting `key`.
    pub(in crate::storage) fn delete(&mut self, key: Vec<u8>) {
        match self.planned.find(&key) {
            Ok(at) if self.planned.at_mut(at).absent_before => {
                self.planned.remove_at(at);
            }
            Ok(at) => self.planned.at_mut(at).value = None,
            Err(hash) => {
                let planned = Planned {
                    value: None,
                    absent_before: false,
                    indexed: true,
                };
                self.planned.insert(hash, key, planned);
            }
        }
    }

    /// The value under `key` once the planned writes are applied, and plans deleting it (no copy
    /// of a value planned in this batch).
    pub(in crate::storage) fn take(&mut self, key: &[u8]) -> Result<Option<Value>, StorageError> {
        let value = match self.planned.position(key) {
            Some(at) if self.planned.at_mut(at).absent_before => self.planned.remove_at(at).value,
            Some(at) => self.planned.at_mut(at).value.take(),
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
    ) -> impl DoubleEndedIterator<Item = (&Vec<u8>, &Planned)> {
        let mut under: Vec<(&Vec<u8>, &Planned)> = (self.planned.iter())
            .filter(|(key, _)| key.starts_with(prefix))
            .collect();
        under.sort_unstable_by(|a, b| a.0.cmp(b.0));
        under.into_iter()
    }

    /// Moves the planned writes into `writes`, in the order first planned (each key once);
    /// the values of `batch`'s messages are encoded here.
    pub(in crate::storage) fn into_writes(
        self,
        batch: &[SessionWrite],
        writes: &mut Vec<KeyWrite>,
    ) {
        writes.extend(self.planned.drain().map(|(key, planned)| KeyWrite {
            key,
            value: planned.value.map(|value| value.encode(batch)),
            absent_before: planned.absent_before,
        }));
    }
}
