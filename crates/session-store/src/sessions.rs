//! The sessions one shard holds, found by client identifier (CONNECT, takeover, timers) and by
//! subscriber key (every delivery).
//!
//! Sessions sit boxed in a slab (freed slots are reused); both indexes hold only the slab index,
//! so a session costs its box, one slab pointer, 4 bytes in the client-id table (which hashes
//! and compares through the slab) and 8 in the subscriber table, instead of two hash-map entries
//! that each hold a 32-byte client-id handle.

use std::collections::HashMap;

use crate::session::{Session, SessionTypes};
use codec::MqttStr;
use hashbrown::HashTable;

/// Sessions by client identifier and by subscriber key.
pub struct Sessions<T: SessionTypes> {
    slots: Vec<Option<Box<Session<T>>>>,
    free: Vec<u32>,
    by_client: HashTable<u32>,
    by_subscriber: HashMap<T::Subscriber, u32, ahash::RandomState>,
    hasher: ahash::RandomState,
}

impl<T: SessionTypes> Default for Sessions<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            by_client: HashTable::new(),
            by_subscriber: HashMap::default(),
            hasher: ahash::RandomState::new(),
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
        self.by_subscriber.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.by_subscriber.is_empty()
    }

    /// Every session held (in no particular order).
    pub fn iter(&self) -> impl Iterator<Item = &Session<T>> {
        self.slots.iter().filter_map(|slot| slot.as_deref())
    }

    fn hash(&self, client_id: &MqttStr) -> u64 {
        self.hasher.hash_one(client_id.as_bytes())
    }

    fn slot_of(&self, client_id: &MqttStr) -> Option<u32> {
        let slots = &self.slots;
        self.by_client
            .find(self.hash(client_id), |&slot| {
                session_at(slots, slot).client_id == *client_id
            })
            .copied()
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
        let slot = *self.by_subscriber.get(&subscriber)?;
        Some(session_at(&self.slots, slot))
    }

    /// The session with subscriber key `subscriber`, for changes.
    pub fn by_subscriber_mut(&mut self, subscriber: T::Subscriber) -> Option<&mut Session<T>> {
        let slot = *self.by_subscriber.get(&subscriber)?;
        self.slots[slot as usize].as_deref_mut()
    }

    /// The client identifier of the session with subscriber key `subscriber`.
    pub fn client_id(&self, subscriber: T::Subscriber) -> Option<&MqttStr> {
        self.by_subscriber(subscriber).map(|s| &s.client_id)
    }

    /// Adds `session`; one held under the same client identifier is replaced and returned.
    pub fn insert(&mut self, session: Box<Session<T>>) -> Option<Box<Session<T>>> {
        let replaced = self.remove(&session.client_id);
        let hash = self.hash(&session.client_id);
        let subscriber = session.subscriber;
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
        self.by_subscriber.insert(subscriber, slot);
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
        let session = self.slots[slot as usize]
            .take()
            .expect("invariant: indexed slots are occupied");
        self.by_subscriber.remove(&session.subscriber);
        self.free.push(slot);
        Some(session)
    }
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
