//! A store as plain keys and values ([`KeyImage`]), whatever engine it came from: read through
//! the shared key layout's loader ([`KvRead`]), cleaned of what the broker could not load
//! (values that do not decode, entries of a session whose record is gone), and counted.

use std::collections::BTreeMap;

use crate::storage::StorageError;
use crate::storage::encoding;
use crate::storage::keyed::{
    self, AWAITING, AWAITING_IDS, DELAYED, INFLIGHT, KeyWrite, KvRead, QUEUED, RETAINED, SESSION,
    Visit, split_client,
};

/// A store read for salvage: its keys, the log's last epoch (0 for the other engines), and
/// what was found on the way.
#[derive(Debug, Default)]
pub(crate) struct ImageRead {
    pub(crate) image: KeyImage,
    pub(crate) last_epoch: u64,
    pub(crate) findings: Vec<String>,
    pub(crate) damaged: bool,
}

/// Every key and its value.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct KeyImage(pub(crate) BTreeMap<Vec<u8>, Vec<u8>>);

/// The tags of the key layout, one scan each (damage under one leaves the others readable).
pub(crate) const TAGS: [u8; 7] = [
    SESSION,
    QUEUED,
    INFLIGHT,
    AWAITING,
    AWAITING_IDS,
    RETAINED,
    DELAYED,
];

impl KeyImage {
    /// Applies a write of a log record.
    pub(crate) fn apply(&mut self, write: KeyWrite) {
        match write.value {
            Some(value) => self.0.insert(write.key, value),
            None => self.0.remove(&write.key),
        };
    }

    /// Reads every key of `kv`, tag by tag; the first error of each tag's scan is kept in
    /// `errors` and what was read before it stays.
    pub(crate) fn read_from(kv: &impl KvRead, errors: &mut Vec<String>) -> Self {
        let mut image = Self::default();
        for tag in TAGS {
            let read = kv.scan(&[tag], &[tag], &mut |key, value| {
                image.0.insert(key.to_vec(), value.to_vec());
                Ok(true)
            });
            if let Err(e) = read {
                errors.push(format!("keys under tag '{}': {e}", tag as char));
            }
        }
        image
    }

    /// Drops what the broker could not load: values that do not decode, keys of no known
    /// layout, and entries of a client whose session record is missing or dropped; how many.
    pub(crate) fn clean(&mut self) -> usize {
        let before = self.0.len();
        self.0.retain(|key, value| decodes(key, value));
        let sessions: std::collections::HashSet<Vec<u8>> = (self.0.keys())
            .filter(|key| key.first() == Some(&SESSION))
            .filter_map(|key| {
                split_client(key)
                    .ok()
                    .map(|(client, _)| client[1..].to_vec())
            })
            .collect();
        self.0.retain(|key, _| match key.first() {
            Some(&SESSION | &RETAINED | &DELAYED) => true,
            _ => split_client(key).is_ok_and(|(client, _)| sessions.contains(&client[1..])),
        });
        before - self.0.len()
    }
}

/// Whether `value` under `key` decodes as the layout says.
fn decodes(key: &[u8], value: &[u8]) -> bool {
    let Some(&tag) = key.first() else {
        return false;
    };
    if tag == RETAINED {
        return keyed::topic_of(key).is_ok() && encoding::decode_message(value).is_ok();
    }
    if tag == DELAYED {
        return keyed::delayed_id_of(key).is_ok() && encoding::decode_delayed(value).is_ok();
    }
    let Ok((client, rest)) = split_client(key) else {
        return false;
    };
    let Ok(client_id) = keyed::client_id(key, client) else {
        return false;
    };
    match tag {
        SESSION => rest.is_empty() && encoding::decode_record(client_id, value).is_ok(),
        QUEUED => rest.len() == 8 && encoding::decode_message(value).is_ok(),
        INFLIGHT => rest.len() == 2 && encoding::decode_inflight(value).is_ok(),
        AWAITING => rest.len() == 2 && value.is_empty(),
        AWAITING_IDS => rest.is_empty() && encoding::decode_awaiting_ids(value).is_ok(),
        _ => false,
    }
}

impl KvRead for KeyImage {
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
        let under = self.0.range(prefix.to_vec()..);
        let keys: Vec<_> = under
            .take_while(|(key, _)| key.starts_with(prefix))
            .collect();
        for (key, value) in keys.into_iter().rev() {
            if !visit(key, value)? {
                break;
            }
        }
        Ok(())
    }
}
