//! The sessions one shard holds, found by client identifier (CONNECT, takeover, timers) and by
//! subscriber key (every delivery).
//!
//! Sessions sit boxed in a slab (freed slots are reused); both indexes hold only the slab index
//! and hash and compare through the slab, so a session costs its box, one slab pointer and 4
//! bytes (and a control byte) in each table, instead of two hash-map entries that each hold a
//! copy of their key (a 32-byte client-id handle, an 8-byte subscriber key padded to 16).
//! A look-up by subscriber key reads the candidate session's key in its box, which delivery
//! reads next anyway.
//!
//! Delivery finds sessions by subscriber key. Paths that work by client id (a stored session's
//! sends and writes, QoS 2 acknowledgements, takeover) ask for one session several times in a
//! row by the session's own client id, a clone sharing its bytes: the slot found last is tried
//! first and matched by the bytes' address, without hashing.

use std::cell::Cell;

use crate::session::{Session, SessionTypes};
use codec::MqttStr;
use hashbrown::HashTable;

/// Sessions by client identifier and by subscriber key.
pub struct Sessions<T: SessionTypes> {
    slots: Vec<Option<Box<Session<T>>>>,
    free: Vec<u32>,
    by_client: HashTable<u32>,
    by_subscriber: HashTable<u32>,
    hasher: ahash::RandomState,
    /// The slot found by the last look-up (`NO_SLOT`: none yet).
    last: Cell<u32>,
}

/// Where [`Sessions::locate`] found a session: its slot and its subscriber key. A delivery
/// that reaches one session several times in a row (queue, window, send) hashes its key once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located<S> {
    slot: u32,
    subscriber: S,
}

impl<S: Copy> Located<S> {
    /// The session's subscriber key.
    pub fn subscriber(&self) -> S {
        self.subscriber
    }
}

/// `Sessions::last` before any look-up.
const NO_SLOT: u32 = u32::MAX;

impl<T: SessionTypes> Default for Sessions<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            by_client: HashTable::new(),
            by_subscriber: HashTable::new(),
            hasher: ahash::RandomState::new(),
            last: Cell::new(NO_SLOT),
        }
    }
}

impl<T: SessionTypes> std::fmt::Debug for Sessions<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("len", &self.len())
            .finish()
    }
}

impl<T: SessionTypes> Sessions<T> {
    /// Sessions held.
    pub fn len(&self) -> usize {
        self.by_client.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.by_client.is_empty()
    }

    /// Every session held (in no particular order).
    pub fn iter(&self) -> impl Iterator<Item = &Session<T>> {
        self.slots.iter().filter_map(|slot| slot.as_deref())
    }

    fn hash(&self, client_id: &MqttStr) -> u64 {
        self.hasher.hash_one(client_id.as_bytes())
    }

    fn hash_subscriber(&self, subscriber: T::Subscriber) -> u64 {
        self.hasher.hash_one(subscriber)
    }

    fn slot_of(&self, client_id: &MqttStr) -> Option<u32> {
        let last = self.last.get();
        let held = self.slots.get(last as usize).and_then(Option::as_deref);
        if held.is_some_and(|session| same_bytes(&session.client_id, client_id)) {
            return Some(last);
        }
        let slots = &self.slots;
        let slot = *self.by_client.find(self.hash(client_id), |&slot| {
            session_at(slots, slot).client_id == *client_id
        })?;
        self.last.set(slot);
        Some(slot)
    }

    /// The slot of the session with subscriber key `subscriber` (remembered as the last found).
    #[inline]
    fn slot_by_subscriber(&self, subscriber: T::Subscriber) -> Option<u32> {
        let slots = &self.slots;
        let slot = *self
            .by_subscriber
            .find(self.hash_subscriber(subscriber), |&slot| {
                session_at(slots, slot).subscriber == subscriber
            })?;
        self.last.set(slot);
        Some(slot)
    }

    /// Where the session with subscriber key `subscriber` sits, to reach it again without
    /// hashing ([`Self::at`], [`Self::at_mut`]).
    pub fn locate(&self, subscriber: T::Subscriber) -> Option<Located<T::Subscriber>> {
        let slot = self.slot_by_subscriber(subscriber)?;
        Some(Located { slot, subscriber })
    }

    /// The session `located` found, if it is still held: its slot is checked to hold the same
    /// subscriber key (a slot freed since may hold another session).
    #[inline]
    pub fn at(&self, located: Located<T::Subscriber>) -> Option<&Session<T>> {
        let session = self.slots.get(located.slot as usize)?.as_deref()?;
        (session.subscriber == located.subscriber).then_some(session)
    }

    /// [`Self::at`], for changes.
    #[inline]
    pub fn at_mut(&mut self, located: Located<T::Subscriber>) -> Option<&mut Session<T>> {
        let session = self.slots.get_mut(located.slot as usize)?.as_deref_mut()?;
        (session.subscriber == located.subscriber).then_some(session)
    }

    /// The session of `client_id`.
    pub fn get(&self, client_id: &MqttStr) -> Option<&Session<T>> {
        let slot = self.slot_of(client_id)?;
        Some(session_at(&self.slots, slot))
    }

    /// The session of `client_id`, for changes.
    pub fn get_mut(&mut self, client_id: &MqttStr) -> Option<&mut Session<T>> {
        let slot = self.slot_of(client_id)?;
        self.slots[slot as usize].as_deref_mut()
    }

    /// The session with subscriber key `subscriber`.
    pub fn by_subscriber(&self, subscriber: T::Subscriber) -> Option<&Session<T>> {
        let slot = self.slot_by_subscriber(subscriber)?;
        Some(session_at(&self.slots, slot))
    }

    /// The session with subscriber key `subscriber`, for changes.
    pub fn by_subscriber_mut(&mut self, subscriber: T::Subscriber) -> Option<&mut Session<T>> {
        let slot = self.slot_by_subscriber(subscriber)?;
        self.slots[slot as usize].as_deref_mut()
    }

    /// The client identifier of the session with subscriber key `subscriber`.
    pub fn client_id(&self, subscriber: T::Subscriber) -> Option<&MqttStr> {
        self.by_subscriber(subscriber).map(|s| &s.client_id)
    }

    /// Adds `session`; one held under the same client identifier is replaced and returned.
    pub fn insert(&mut self, session: Box<Session<T>>) -> Option<Box<Session<T>>> {
        let replaced = self.remove(&session.client_id);
        debug_assert!(
            self.slot_by_subscriber(session.subscriber).is_none(),
            "invariant: a subscriber key names one session"
        );
        let hash = self.hash(&session.client_id);
        let subscriber_hash = self.hash_subscriber(session.subscriber);
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(session);
                slot
            }
            None => {
                let slot = u32::try_from(self.slots.len())
                    .expect("invariant: fewer than 2^32 sessions on one shard");
                self.slots.push(Some(session));
                slot
            }
        };
        let slots = &self.slots;
        let hasher = &self.hasher;
        self.by_client.insert_unique(hash, slot, |&other| {
            hasher.hash_one(session_at(slots, other).client_id.as_bytes())
        });
        self.by_subscriber
            .insert_unique(subscriber_hash, slot, |&other| {
                hasher.hash_one(session_at(slots, other).subscriber)
            });
        replaced
    }

    /// Removes and returns the session of `client_id`.
    pub fn remove(&mut self, client_id: &MqttStr) -> Option<Box<Session<T>>> {
        let hash = self.hash(client_id);
        let slots = &self.slots;
        let entry = self
            .by_client
            .find_entry(hash, |&slot| {
                session_at(slots, slot).client_id == *client_id
            })
            .ok()?;
        let (slot, _) = entry.remove();
        let subscriber_hash = self.hash_subscriber(session_at(&self.slots, slot).subscriber);
        self.by_subscriber
            .find_entry(subscriber_hash, |&other| other == slot)
            .expect("invariant: every held session is indexed by its subscriber key")
            .remove();
        let session = self.slots[slot as usize]
            .take()
            .expect("invariant: indexed slots are occupied");
        self.free.push(slot);
        Some(session)
    }
}

/// Whether `a` and `b` are the same bytes in memory: then, both being alive, they are equal
/// (equal strings elsewhere in memory are left to the hashed look-up).
fn same_bytes(a: &MqttStr, b: &MqttStr) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len()
}

fn session_at<T: SessionTypes>(slots: &[Option<Box<Session<T>>>], slot: u32) -> &Session<T> {
    slots[slot as usize]
        .as_deref()
        .expect("invariant: indexed slots are occupied")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::session::SessionExpiry;
    use crate::session::tests::TestTypes;

    type Sessions = super::Sessions<TestTypes>;

    fn session(client: &str, subscriber: u64) -> Box<Session<TestTypes>> {
        Session::new(id(client), subscriber, 10)
    }

    fn id(client: &str) -> MqttStr {
        MqttStr::from_bytes(bytes::Bytes::copy_from_slice(client.as_bytes())).unwrap()
    }

    /// The slot found last is tried first by address: it answers for the session's own client
    /// id (a clone), never for another session that took the slot over, and a copy of the
    /// client id elsewhere in memory still finds its session by hash.
    #[test]
    fn the_last_found_session_is_found_again_by_its_own_client_id_only() {
        let mut sessions = Sessions::default();
        sessions.insert(session("a", 1));
        sessions.insert(session("b", 2));
        let own_a = sessions.client_id(1).unwrap().clone();
        assert_eq!(sessions.get(&own_a).unwrap().subscriber, 1);
        assert_eq!(sessions.get_mut(&own_a).unwrap().subscriber, 1);
        assert_eq!(sessions.get(&id("b")).unwrap().subscriber, 2);
        assert_eq!(sessions.get(&own_a).unwrap().subscriber, 1);
        sessions.remove(&own_a);
        assert!(sessions.get(&own_a).is_none(), "a removed session is gone");
        sessions.insert(session("c", 3));
        let own_c = sessions.client_id(3).unwrap().clone();
        assert!(sessions.get(&own_a).is_none(), "its slot now holds c");
        assert_eq!(sessions.get(&own_c).unwrap().subscriber, 3);
        assert_eq!(sessions.get(&id("c")).unwrap().subscriber, 3);
        assert_eq!(sessions.by_subscriber(2).unwrap().client_id, id("b"));
    }

    /// A located session is reached again while it stays; once it is gone, its located slot
    /// answers nothing, even after another session took the slot over.
    #[test]
    fn a_located_session_is_reached_while_it_stays_and_never_its_slots_next_holder() {
        let mut sessions = Sessions::default();
        sessions.insert(session("a", 1));
        sessions.insert(session("b", 2));
        let a = sessions.locate(1).unwrap();
        assert_eq!(a.subscriber(), 1);
        assert_eq!(sessions.at(a).unwrap().client_id, id("a"));
        sessions.at_mut(a).unwrap().expiry = SessionExpiry::Never;
        assert_eq!(
            sessions.by_subscriber(1).unwrap().expiry,
            SessionExpiry::Never
        );
        assert!(sessions.locate(3).is_none());
        sessions.remove(&id("a"));
        assert!(sessions.at(a).is_none(), "a removed session is gone");
        sessions.insert(session("c", 3));
        assert_eq!(sessions.locate(3).map(|c| c == a), Some(false));
        assert!(sessions.at_mut(a).is_none(), "its slot now holds c");
        assert_eq!(
            sessions.at(sessions.locate(2).unwrap()).unwrap().subscriber,
            2
        );
    }

    #[test]
    fn found_by_client_and_by_subscriber() {
        let mut sessions = Sessions::default();
        assert!(sessions.insert(session("a", 1)).is_none());
        assert!(sessions.insert(session("b", 2)).is_none());
        assert_eq!(sessions.get(&id("a")).unwrap().subscriber, 1);
        assert_eq!(sessions.client_id(2), Some(&id("b")));
        sessions.get_mut(&id("b")).unwrap().expiry = SessionExpiry::Never;
        assert_eq!(
            sessions.by_subscriber(2).unwrap().expiry,
            SessionExpiry::Never
        );
        assert!(sessions.get(&id("c")).is_none());
        assert_eq!(sessions.len(), 2);
    }

    #[test]
    fn a_second_session_for_a_client_replaces_the_first() {
        let mut sessions = Sessions::default();
        sessions.insert(session("a", 1));
        let old = sessions.insert(session("a", 2)).unwrap();
        assert_eq!(old.subscriber, 1);
        assert!(sessions.by_subscriber(1).is_none());
        assert_eq!(sessions.get(&id("a")).unwrap().subscriber, 2);
        assert_eq!(sessions.len(), 1);
    }

    #[test]
    fn removal_clears_both_indexes_and_slots_are_reused() {
        let mut sessions = Sessions::default();
        for n in 0..100u64 {
            sessions.insert(session(&format!("c{n}"), n));
        }
        for n in (0..100u64).step_by(2) {
            let removed = sessions.remove(&id(&format!("c{n}"))).unwrap();
            assert_eq!(removed.subscriber, n);
            assert!(sessions.by_subscriber(n).is_none());
        }
        assert!(sessions.remove(&id("c0")).is_none());
        for n in 100..150u64 {
            sessions.insert(session(&format!("c{n}"), n));
        }
        assert_eq!(sessions.slots.len(), 100, "freed slots are reused");
        for n in (1..100u64).step_by(2).chain(100..150) {
            assert_eq!(sessions.get(&id(&format!("c{n}"))).unwrap().subscriber, n);
        }
        assert_eq!(sessions.len(), 100);
    }
}
