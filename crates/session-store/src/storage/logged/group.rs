//! One session's logged keys under one tag, by the number that ends them (a group of
//! [`super::pending::Pending`]).
//!
//! Flows (inflight entries, inbound QoS 2 ids awaiting PUBREL) are hashed: each is put, updated
//! and deleted by its packet id within milliseconds, and a group of them is only ever listed
//! whole (a checkpoint, a carry, a load), so a hash map serves each write without a tree's
//! comparisons and node shifts. Queued messages and records stay ordered: a queue is read a
//! page at a time from a sequence number on.

use std::collections::{BTreeMap, HashMap, btree_map, hash_map};

/// A group's entries by number.
#[derive(Debug)]
pub(super) enum Group<V> {
    Ordered(BTreeMap<u64, V>),
    Hashed(HashMap<u64, V, foldhash::fast::RandomState>),
}

impl<V> Group<V> {
    /// An empty group; `hashed` for one that is never read a range at a time.
    pub(super) fn new(hashed: bool) -> Self {
        if hashed {
            Self::Hashed(HashMap::default())
        } else {
            Self::Ordered(BTreeMap::new())
        }
    }

    /// Writes `write` to the entry under `number`: `present` updates one that is there (and
    /// says whether it stays), `absent` makes one where there is none.
    pub(super) fn write<W>(
        &mut self,
        number: u64,
        write: W,
        present: impl FnOnce(&mut V, W) -> bool,
        absent: impl FnOnce(W) -> V,
    ) {
        match self {
            Self::Ordered(map) => match map.entry(number) {
                btree_map::Entry::Occupied(mut found) => {
                    if !present(found.get_mut(), write) {
                        found.remove();
                    }
                }
                btree_map::Entry::Vacant(room) => {
                    room.insert(absent(write));
                }
            },
            Self::Hashed(map) => match map.entry(number) {
                hash_map::Entry::Occupied(mut found) => {
                    if !present(found.get_mut(), write) {
                        found.remove();
                    }
                }
                hash_map::Entry::Vacant(room) => {
                    room.insert(absent(write));
                }
            },
        }
    }

    pub(super) fn get(&self, number: u64) -> Option<&V> {
        match self {
            Self::Ordered(map) => map.get(&number),
            Self::Hashed(map) => map.get(&number),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        match self {
            Self::Ordered(map) => map.is_empty(),
            Self::Hashed(map) => map.is_empty(),
        }
    }

    /// Keeps the entries for which `keep` says so.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(u64, &mut V) -> bool) {
        match self {
            Self::Ordered(map) => map.retain(|number, value| keep(*number, value)),
            Self::Hashed(map) => map.retain(|number, value| keep(*number, value)),
        }
    }

    /// Every entry, in no particular order.
    pub(super) fn values(&self) -> Box<dyn Iterator<Item = &V> + '_> {
        match self {
            Self::Ordered(map) => Box::new(map.values()),
            Self::Hashed(map) => Box::new(map.values()),
        }
    }

    /// The entries from `from` on, in order of their numbers.
    pub(super) fn sorted_from(&self, from: u64) -> Sorted<'_, V> {
        match self {
            Self::Ordered(map) => Sorted::Tree(map.range(from..)),
            Self::Hashed(map) => {
                let mut listed: Vec<_> = (map.iter()).filter(|(n, _)| **n >= from).collect();
                listed.sort_unstable_by_key(|(number, _)| **number);
                Sorted::Listed(listed.into_iter())
            }
        }
    }
}

/// A group's entries in order.
pub(super) enum Sorted<'a, V> {
    Tree(btree_map::Range<'a, u64, V>),
    Listed(std::vec::IntoIter<(&'a u64, &'a V)>),
}

impl<'a, V> Iterator for Sorted<'a, V> {
    type Item = (&'a u64, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Tree(range) => range.next(),
            Self::Listed(listed) => listed.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(group: &Group<&str>, from: u64) -> Vec<u64> {
        group.sorted_from(from).map(|(number, _)| *number).collect()
    }

    #[test]
    fn both_kinds_list_their_entries_in_order_and_drop_what_a_write_does_not_keep() {
        for hashed in [false, true] {
            let mut group = Group::new(hashed);
            for number in [7, 3, 9, 1] {
                group.write(number, "new", |_, _| true, |new| new);
            }
            let update = |value: &mut &str, new| {
                *value = new;
                true
            };
            group.write(3, "updated", update, |_| "unused");
            group.write(9, "unused", |_, _| false, |_| "unused");
            assert_eq!(numbers(&group, 0), [1, 3, 7], "hashed: {hashed}");
            assert_eq!(numbers(&group, 3), [3, 7], "hashed: {hashed}");
            assert_eq!(group.get(3), Some(&"updated"));
            group.retain(|number, _| number != 1);
            assert_eq!(group.values().count(), 2);
            group.retain(|_, _| false);
            assert!(group.is_empty());
        }
    }
}
