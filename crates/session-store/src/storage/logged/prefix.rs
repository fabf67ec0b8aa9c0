//! A session's key prefix as the epoch's map keeps it: inline when short (most client
//! identifiers), so that a lookup compares bytes inside the table instead of following a
//! pointer to another cache line.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// Prefixes up to this long are kept inline: the tag, the two length bytes and a client
/// identifier of up to 27 bytes.
const INLINE: usize = 30;

/// A key prefix (tag and length-prefixed client identifier). Hashes and compares as its bytes,
/// so a map keyed by it is looked up with a `&[u8]`.
#[derive(Clone)]
pub(super) enum Prefix {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Prefix {
    pub(super) fn new(prefix: &[u8]) -> Self {
        match u8::try_from(prefix.len()) {
            Ok(len) if prefix.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..prefix.len()].copy_from_slice(prefix);
                Self::Inline { len, bytes }
            }
            _ => Self::Heap(prefix.into()),
        }
    }
}

impl Deref for Prefix {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Heap(bytes) => bytes,
        }
    }
}

impl Borrow<[u8]> for Prefix {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl Hash for Prefix {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl PartialEq for Prefix {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Prefix {}

impl std::fmt::Debug for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{}\"", self.escape_ascii())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn short_and_long_prefixes_are_found_by_their_bytes() {
        let short = b"q\x00\x03abc".to_vec();
        let long = [b"q\x00\x28".as_slice(), &[b'x'; 40]].concat();
        assert!(matches!(Prefix::new(&short), Prefix::Inline { .. }));
        assert!(matches!(Prefix::new(&long), Prefix::Heap(_)));
        let mut map = HashMap::new();
        map.insert(Prefix::new(&short), 1);
        map.insert(Prefix::new(&long), 2);
        assert_eq!(map.get(short.as_slice()), Some(&1));
        assert_eq!(map.get(long.as_slice()), Some(&2));
        assert_eq!(map.get(&short[..5]), None);
        assert_eq!(&*Prefix::new(&long), long.as_slice());
    }
}
