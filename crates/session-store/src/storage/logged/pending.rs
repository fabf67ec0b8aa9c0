//! The key writes logged since the last checkpoint, netted: a later write of a key replaces
//! the earlier one, and a key put by this epoch where the store below held nothing is simply
//! forgotten when it is deleted again (a message stored, sent, released and acknowledged
//! between two checkpoints never reaches the B-tree, not even as a deletion).
//!
//! A session's keys are grouped by their client prefix (tag and length-prefixed client
//! identifier), each group by the number that ends its keys (sequence number, packet id; see
//! [`super::group`]): a write hashes the prefix once and then finds an integer, and a scan of
//! one session's keys is one group's range. Retained messages (and any key of another shape) are
//! kept apart, by whole key.

use std::collections::{BTreeMap, HashMap, btree_map};

use super::group::Group;
use super::prefix::Prefix;
use super::record;
use crate::storage::keyed::{
    AWAITING, AWAITING_IDS, INFLIGHT, KeyWrite, QUEUED, SESSION, split_client,
};

/// A logged key's latest state.
#[derive(Debug)]
struct Entry {
    /// Its value (`None`: deleted).
    value: Option<Vec<u8>>,
    /// Whether the store below (earlier epochs and the B-tree) may hold the key.
    below: bool,
    /// Carried over from the epoch before, where it was new and still live at the end: if it
    /// is still live when this epoch ends, it goes to the B-tree.
    carried: bool,
}

impl Entry {
    /// Live, new in this epoch (the store below does not hold it) and never carried over.
    fn is_young(&self) -> bool {
        self.value.is_some() && !self.below && !self.carried
    }

    /// The bytes it takes in a log record under a key of `key_len` if it was carried over and
    /// is still live, else 0.
    fn carried_live_len(&self, key_len: usize) -> usize {
        match &self.value {
            Some(value) if self.carried => record::write_len(key_len, Some(value.len())),
            _ => 0,
        }
    }

    /// The bytes it takes in a log record under a key of `key_len` if it is young, else 0.
    fn young_len(&self, key_len: usize) -> usize {
        match &self.value {
            Some(value) if self.is_young() => record::write_len(key_len, Some(value.len())),
            _ => 0,
        }
    }
}

/// How many bytes end the keys under `tag` after the client prefix (`None`: not a session
/// tag).
fn suffix_len(tag: u8) -> Option<usize> {
    match tag {
        SESSION | AWAITING_IDS => Some(0),
        QUEUED => Some(8),
        INFLIGHT | AWAITING => Some(2),
        _ => None,
    }
}

/// A session key split into its client prefix and the number that ends it; `None` for any
/// other key.
fn session_place(key: &[u8]) -> Option<(&[u8], u64)> {
    let len = suffix_len(*key.first()?)?;
    let (prefix, rest) = split_client(key).ok()?;
    (rest.len() == len).then(|| (prefix, number(rest)))
}

/// A big-endian number of up to 8 bytes.
fn number(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |n, byte| (n << 8) | u64::from(*byte))
}

/// The length of a key in the group of `prefix`.
fn key_len(prefix: &[u8]) -> usize {
    prefix.len() + suffix_len(prefix[0]).unwrap_or(0)
}

/// The key of `number` under `prefix`.
fn key_of(prefix: &[u8], number: u64) -> Vec<u8> {
    let len = suffix_len(prefix[0]).expect("invariant: a group's prefix starts with a session tag");
    [prefix, &number.to_be_bytes()[8 - len..]].concat()
}

/// The keys and values of a group's `entries` under `prefix`.
fn entries<'a>(
    prefix: &'a [u8],
    entries: impl Iterator<Item = (&'a u64, &'a Entry)>,
) -> impl Iterator<Item = Found<'a>> {
    entries.map(|(number, entry)| (key_of(prefix, *number), entry.value.as_deref()))
}

/// Applies `write` to `map`'s entry for `key`.
fn apply_entry(map: &mut BTreeMap<Vec<u8>, Entry>, key: Vec<u8>, write: Write) {
    match map.entry(key) {
        btree_map::Entry::Occupied(mut found) => {
            if !write.update(found.get_mut()) {
                found.remove();
            }
        }
        btree_map::Entry::Vacant(room) => {
            room.insert(write.into_entry());
        }
    }
}

/// A write as an entry takes it.
struct Write {
    value: Option<Vec<u8>>,
    absent_before: bool,
    carried: bool,
}

impl Write {
    /// Applies it to the key's entry; whether the entry stays (a deletion of a key the store
    /// below does not hold leaves nothing).
    fn update(self, entry: &mut Entry) -> bool {
        if self.value.is_none() && !entry.below {
            return false;
        }
        entry.value = self.value;
        true
    }

    /// The entry of a key this epoch had not written.
    fn into_entry(self) -> Entry {
        Entry {
            below: self.value.is_none() || !self.absent_before,
            value: self.value,
            carried: self.carried,
        }
    }
}

/// What one epoch of the log changes, by key.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Session keys by client prefix, then by their ending number.
    sessions: HashMap<Prefix, Group<Entry>, foldhash::fast::RandomState>,
    /// Every other key (retained messages).
    others: BTreeMap<Vec<u8>, Entry>,
}

/// Which young entries to carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Young {
    /// QoS 1/2 flows in progress (inflight entries, inbound QoS 2 ids awaiting PUBREL): they
    /// end with the client's next acknowledgement.
    Flows,
    /// Everything else (queued messages, session records, retained messages), which may live
    /// long (an offline session's queue).
    Rest,
}

impl Young {
    fn has_tag(self, tag: u8) -> bool {
        matches!(tag, INFLIGHT | AWAITING | AWAITING_IDS) == (self == Self::Flows)
    }
}

/// A found key and its value (`None`: deleted).
pub(super) type Found<'a> = (Vec<u8>, Option<&'a [u8]>);

impl Pending {
    /// Applies one logged write.
    pub(super) fn apply(&mut self, write: KeyWrite) {
        self.apply_as(write, false);
    }

    /// Applies a write carried over from the epoch before ([`Self::take_young`]).
    pub(super) fn apply_carried(&mut self, write: KeyWrite) {
        self.apply_as(write, true);
    }

    fn apply_as(&mut self, write: KeyWrite, carried: bool) {
        let KeyWrite {
            key,
            value,
            absent_before,
        } = write;
        let write = Write {
            value,
            absent_before,
            carried,
        };
        let Some((prefix, number)) = session_place(&key) else {
            return apply_entry(&mut self.others, key, write);
        };
        let group = match self.sessions.get_mut(prefix) {
            Some(group) => group,
            None => (self.sessions.entry(Prefix::new(prefix)))
                .or_insert_with(|| Group::new(Young::Flows.has_tag(prefix[0]))),
        };
        group.write(
            number,
            write,
            |entry, write| write.update(entry),
            Write::into_entry,
        );
    }

    /// Takes young entries of `kind` out (live, new in this epoch, never carried over), as
    /// puts of keys the store below does not hold, as many as a log record of at most `limit`
    /// bytes holds; the rest stay (and reach the B-tree with the epoch). Carried into the next
    /// epoch, most flows in progress are deleted there and never reach the B-tree.
    pub(super) fn take_young(&mut self, kind: Young, limit: usize) -> Vec<KeyWrite> {
        let mut room = limit;
        let mut taken = Vec::new();
        // Carries the entry under the key `key` makes (`key_len` long) if it is young and fits;
        // whether it stays.
        let mut carry = |key_len: usize, key: &dyn Fn() -> Vec<u8>, entry: &mut Entry| {
            let len = entry.young_len(key_len);
            if len == 0 || len > room {
                return true;
            }
            room -= len;
            taken.push(KeyWrite {
                key: key(),
                value: entry.value.take(),
                absent_before: true,
            });
            false
        };
        for (prefix, group) in &mut self.sessions {
            if kind.has_tag(prefix[0]) {
                let len = key_len(prefix);
                group.retain(|number, entry| carry(len, &|| key_of(prefix, number), entry));
            }
        }
        self.sessions.retain(|_, group| !group.is_empty());
        if kind == Young::Rest {
            (self.others).retain(|key, entry| carry(key.len(), &|| key.clone(), entry));
        }
        taken
    }

    /// The bytes in a log record of the flows carried over from the epoch before and still in
    /// progress (they outlived this epoch).
    pub(super) fn outlived_flows_len(&self) -> usize {
        let flows = (self.sessions.iter()).filter(|(prefix, _)| Young::Flows.has_tag(prefix[0]));
        let lens = flows.flat_map(|(prefix, group)| {
            (group.values()).map(|entry| entry.carried_live_len(key_len(prefix)))
        });
        lens.sum()
    }

    /// `Some(value)` if this epoch wrote `key` (`Some(None)`: deleted it).
    pub(super) fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        let entry = match session_place(key) {
            Some((prefix, number)) => self.sessions.get(prefix)?.get(number)?,
            None => self.others.get(key)?,
        };
        Some(entry.value.as_deref())
    }

    /// The written keys that start with `prefix`, from `start` on, in key order.
    pub(super) fn under<'a>(&'a self, prefix: &[u8], start: &[u8]) -> Vec<Found<'a>> {
        let found = (self.group_under(prefix, start)).unwrap_or_else(|| {
            // A scan across sessions (loading): every key, sorted.
            let mut found: Vec<Found<'a>> = self.writes().collect();
            found.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            found
        });
        (found.into_iter())
            .filter(|(key, _)| key.starts_with(prefix) && key.as_slice() >= start)
            .collect()
    }

    /// With `prefix` one session's prefix under one tag: its group's keys from `start` on, in
    /// order (a superset of them: the caller filters).
    fn group_under<'a>(&'a self, prefix: &[u8], start: &[u8]) -> Option<Vec<Found<'a>>> {
        suffix_len(*prefix.first()?)?;
        split_client(prefix)
            .ok()
            .filter(|(_, rest)| rest.is_empty())?;
        let Some((prefix, group)) = self.sessions.get_key_value(prefix) else {
            return Some(Vec::new());
        };
        let from = session_place(start).map_or(0, |(_, number)| number);
        Some(entries(prefix, group.sorted_from(from)).collect())
    }

    /// Every written key with its value (`None`: delete it below), sessions in key order.
    pub(super) fn writes(&self) -> impl Iterator<Item = Found<'_>> {
        let mut groups: Vec<_> = self.sessions.iter().collect();
        groups.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let sessions =
            (groups.into_iter()).flat_map(|(prefix, group)| entries(prefix, group.sorted_from(0)));
        let others = (self.others.iter()).map(|(key, entry)| (key.clone(), entry.value.as_deref()));
        sessions.chain(others)
    }

    /// Whether this epoch changes nothing.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.others.is_empty() && self.sessions.values().all(Group::is_empty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::contract_writes::text;
    use crate::storage::keyed::{QUEUED, inflight_key, prefix, queued_key, session_key};

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
        let key = inflight_key(&text("a"), codec::PacketId::new(1).unwrap());
        let mut pending = Pending::default();
        pending.apply(put(&key, true));
        pending.apply(put(&key, false));
        pending.apply(delete(&key));
        assert!(pending.is_empty());
    }

    #[test]
    fn a_key_the_store_may_hold_is_deleted_below() {
        let (session, queued) = (session_key(&text("a")), queued_key(&text("a"), 1));
        let mut pending = Pending::default();
        pending.apply(put(&session, false));
        pending.apply(delete(&session));
        pending.apply(delete(&queued));
        let writes: Vec<_> = pending.writes().collect();
        assert_eq!(writes, [(queued, None), (session.clone(), None)]);
        assert_eq!(pending.get(&session), Some(None));
        assert_eq!(pending.get(&session_key(&text("b"))), None);
    }

    #[test]
    fn a_key_put_again_after_its_deletion_is_still_deleted_below_if_deleted_again() {
        let key = queued_key(&text("a"), 1);
        let mut pending = Pending::default();
        pending.apply(delete(&key));
        pending.apply(put(&key, true));
        pending.apply(delete(&key));
        assert_eq!(pending.get(&key), Some(None));
    }

    #[test]
    fn keys_under_a_prefix_come_in_key_order() {
        let mut pending = Pending::default();
        for (client, seq) in [("b", 2), ("a", 9), ("b", 1), ("ab", 1), ("b", 3)] {
            pending.apply(put(&queued_key(&text(client), seq), true));
        }
        pending.apply(put(b"tx/y", false));
        let b = prefix(QUEUED, &text("b"));
        let from_2 = queued_key(&text("b"), 2);
        let keys = |found: Vec<(Vec<u8>, _)>| found.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(
            keys(pending.under(&b, &from_2)),
            [from_2.clone(), queued_key(&text("b"), 3)]
        );
        let all = keys(pending.under(b"q", b"q"));
        assert_eq!(all.len(), 5);
        assert!(all.is_sorted());
        assert_eq!(keys(pending.under(b"t", b"t")), [b"tx/y".to_vec()]);
    }

    #[test]
    fn young_entries_are_carried_once() {
        let (new, old) = (queued_key(&text("a"), 1), queued_key(&text("a"), 2));
        let gone = queued_key(&text("a"), 3);
        let mut ended = Pending::default();
        ended.apply(put(&new, true));
        ended.apply(put(&old, false));
        ended.apply(delete(&gone));
        let carried = ended.take_young(Young::Rest, usize::MAX);
        assert_eq!(carried.len(), 1);
        assert_eq!(
            (carried[0].key.as_slice(), carried[0].absent_before),
            (new.as_slice(), true)
        );
        let left: Vec<_> = ended.writes().map(|(key, _)| key).collect();
        assert_eq!(left, [old.clone(), gone]);
        let mut next = Pending::default();
        for write in carried {
            next.apply_carried(write);
        }
        assert!(
            next.take_young(Young::Rest, usize::MAX).is_empty(),
            "carried twice"
        );
        next.apply(delete(&new));
        assert!(
            next.is_empty(),
            "a carried entry deleted again reaches the B-tree"
        );
    }

    #[test]
    fn flows_in_progress_are_taken_apart_from_the_rest() {
        let flow = inflight_key(&text("a"), codec::PacketId::new(1).unwrap());
        let queued = queued_key(&text("a"), 1);
        let mut ended = Pending::default();
        ended.apply(put(&flow, true));
        ended.apply(put(&queued, true));
        ended.apply(put(b"tx/y", true));
        let flows = ended.take_young(Young::Flows, usize::MAX);
        assert_eq!(flows.len(), 1);
        assert_eq!(flows[0].key, flow);
        let rest: Vec<_> = (ended.take_young(Young::Rest, usize::MAX).into_iter())
            .map(|w| w.key)
            .collect();
        assert_eq!(rest.len(), 2);
        assert!(rest.contains(&queued) && rest.contains(&b"tx/y".to_vec()));
    }

    #[test]
    fn only_what_fits_in_the_limit_is_carried() {
        let (first, second) = (queued_key(&text("a"), 1), queued_key(&text("a"), 2));
        let (one, least) = (
            record::write_len(first.len(), Some(1)),
            record::write_len(4, Some(1)),
        );
        let mut ended = Pending::default();
        for key in [&first, &second] {
            ended.apply(put(key, true));
        }
        ended.apply(put(b"tx/y", true));
        assert!(ended.take_young(Young::Rest, least - 1).is_empty());
        assert_eq!(ended.writes().count(), 3);
        let carried = ended.take_young(Young::Rest, one);
        assert_eq!(carried.len(), 1, "one entry fits");
        assert_eq!(ended.writes().count(), 2, "the rest stays for the B-tree");
        assert_eq!(ended.take_young(Young::Rest, usize::MAX).len(), 2);
        assert_eq!(ended.writes().count(), 0);
    }
}
