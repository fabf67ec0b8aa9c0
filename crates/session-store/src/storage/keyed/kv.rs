//! What the shared layer needs of an engine's reads ([`KvRead`]), and the key writes it hands
//! back ([`KeyWrite`]).

use crate::storage::StorageError;

/// One key to set or delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::storage) struct KeyWrite {
    pub(in crate::storage) key: Vec<u8>,
    /// The value to set (`None`: delete the key).
    pub(in crate::storage) value: Option<Vec<u8>>,
    /// The store is known to hold no value under the key before this write (an engine that
    /// keeps recent writes in memory drops such a key again, rather than deleting it below,
    /// when a later write deletes it).
    pub(in crate::storage) absent_before: bool,
}

/// A visitor of keys (and values) in a scan: `Ok(true)` to go on, `Ok(false)` to stop.
pub(in crate::storage) type Visit<'a> =
    &'a mut dyn FnMut(&[u8], &[u8]) -> Result<bool, StorageError>;

/// Reads of one engine, inside the transaction (or snapshot) they are made in.
pub(in crate::storage) trait KvRead {
    /// The value under `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;

    /// Whether `key` has a value (without copying it).
    fn contains(&self, key: &[u8]) -> Result<bool, StorageError>;

    /// Visits the keys from `start` on that start with `prefix`, in key order.
    fn scan(&self, start: &[u8], prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError>;

    /// Visits the keys that start with `prefix`, last first.
    fn scan_back(&self, prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError>;
}

/// The first key after every key starting with `prefix` (`None`: there is none).
pub(in crate::storage) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn the_end_of_a_prefix_is_its_successor() {
        assert_eq!(prefix_end(b"q\x00\x01a"), Some(b"q\x00\x01b".to_vec()));
        assert_eq!(prefix_end(b"q\xff"), Some(b"r".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }
}
