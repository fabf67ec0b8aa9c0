//! The key writes logged since the last checkpoint, netted: a later write of a key replaces
//! the earlier one, and a key put by this epoch where the store below held nothing is simply
//! forgotten when it is deleted again (a message stored, sent, released and acknowledged
//! between two checkpoints never reaches the B-tree, not even as a deletion).

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::storage::keyed::KeyWrite;

/// A logged key's latest state.
#[derive(Debug)]
struct Entry {
    /// Its value (`None`: deleted).
    value: Option<Vec<u8>>,
    /// Whether the store below (earlier epochs and the B-tree) may hold the key.
    below: bool,
}

/// What one epoch of the log changes, by key (ordered: the engine's scans merge it with the
/// B-tree's).
#[derive(Debug, Default)]
pub(super) struct Pending {
    entries: BTreeMap<Vec<u8>, Entry>,
}

impl Pending {
    /// Applies one logged write.
    pub(super) fn apply(&mut self, write: KeyWrite) {
        let KeyWrite {
            key,
            value,
            absent_before,
        } = write;
        match self.entries.get_mut(&key) {
            Some(entry) if value.is_none() && !entry.below => {
                self.entries.remove(&key);
            }
            Some(entry) => entry.value = value,
            None => {
                let below = value.is_none() || !absent_before;
                self.entries.insert(key, Entry { value, below });
            }
        }
    }

    /// `Some(value)` if this epoch wrote `key` (`Some(None)`: deleted it).
    pub(super) fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        (self.entries.get(key)).map(|entry| entry.value.as_deref())
    }

    /// The written keys from `start` (included) to `end` (excluded; `None`: to the last), in key
    /// order, with their values (`None`: deleted).
    pub(super) fn range<'a>(
        &'a self,
        start: &[u8],
        end: Option<&[u8]>,
    ) -> impl DoubleEndedIterator<Item = (&'a [u8], Option<&'a [u8]>)> + use<'a> {
        let end = end.map_or(Bound::Unbounded, Bound::Excluded);
        let range = (self.entries).range::<[u8], _>((Bound::Included(start), end));
        range.map(|(key, entry)| (key.as_slice(), entry.value.as_deref()))
    }

    /// Every written key in key order, with its value (`None`: delete it below).
    pub(super) fn writes(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.range(&[], None)
    }

    /// Whether this epoch changes nothing.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &[u8], absent_before: bool) -> KeyWrite {
        KeyWrite {
            key: key.to_vec(),
            value: Some(b"v".to_vec()),
            absent_before,
        }
    }

    fn delete(key: &[u8]) -> KeyWrite {
        KeyWrite {
            key: key.to_vec(),
            value: None,
            absent_before: false,
        }
    }

    #[test]
    fn a_key_new_in_the_epoch_and_deleted_again_leaves_nothing() {
        let mut pending = Pending::default();
        pending.apply(put(b"i1", true));
        pending.apply(put(b"i1", false));
        pending.apply(delete(b"i1"));
        assert!(pending.is_empty());
    }

    #[test]
    fn a_key_the_store_may_hold_is_deleted_below() {
        let mut pending = Pending::default();
        pending.apply(put(b"s1", false));
        pending.apply(delete(b"s1"));
        pending.apply(delete(b"q1"));
        let writes: Vec<_> = pending.writes().collect();
        assert_eq!(writes, [(&b"q1"[..], None), (&b"s1"[..], None)]);
        assert_eq!(pending.get(b"s1"), Some(None));
        assert_eq!(pending.get(b"t1"), None);
    }

    #[test]
    fn a_key_put_again_after_its_deletion_is_still_deleted_below_if_deleted_again() {
        let mut pending = Pending::default();
        pending.apply(delete(b"q1"));
        pending.apply(put(b"q1", true));
        pending.apply(delete(b"q1"));
        assert_eq!(pending.get(b"q1"), Some(None));
    }
}
