//! [`TtlCache`]: a bounded map whose entries expire, for backend answers.
//!
//! Bounded by entry count: inserting into a full cache first drops expired entries, then the
//! oldest. Shared by every shard behind one mutex; the critical sections are a hash lookup or
//! insert, and lookups happen per CONNECT and per uncached topic check, not per message.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A bounded cache of `V` by `K`, each entry valid until its deadline.
pub struct TtlCache<K, V> {
    inner: Mutex<Entries<K, V>>,
    capacity: usize,
    ttl: Duration,
}

struct Entries<K, V> {
    /// Value, deadline and the insertion number that names this version of the entry.
    map: HashMap<K, (V, Instant, u64)>,
    /// Keys in insertion order with their insertion number (a key re-inserted appears twice;
    /// the stale one no longer matches the map's number and is skipped).
    order: VecDeque<(K, u64)>,
    inserted: u64,
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    /// A cache of at most `capacity` entries (0: caches nothing) that live `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            inner: Mutex::new(Entries {
                map: HashMap::new(),
                order: VecDeque::new(),
                inserted: 0,
            }),
            capacity,
            ttl,
        }
    }

    /// The value for `key` if it has not expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let entries = self.lock();
        let (value, deadline, _) = entries.map.get(key)?;
        (now < *deadline).then(|| value.clone())
    }

    /// Keeps `value` for `key` until `now` + the TTL, or `until` if that is sooner.
    pub fn insert(&self, key: K, value: V, now: Instant, until: Option<Instant>) {
        if self.capacity == 0 || self.ttl.is_zero() {
            return;
        }
        let deadline = until.map_or(now + self.ttl, |until| until.min(now + self.ttl));
        let mut entries = self.lock();
        if !entries.map.contains_key(&key) && entries.map.len() >= self.capacity {
            entries.make_room(self.capacity);
        }
        entries.inserted += 1;
        let number = entries.inserted;
        entries.order.push_back((key.clone(), number));
        entries.map.insert(key, (value, deadline, number));
        // Re-inserted keys leave stale entries in `order`: keep it within twice the capacity.
        if entries.order.len() > self.capacity.saturating_mul(2) {
            entries.drop_stale_order();
        }
    }

    /// Entries held now (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// Forgets every entry (credentials or rules changed).
    pub fn clear(&self) {
        let mut entries = self.lock();
        entries.map.clear();
        entries.order.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<K, V>> {
        // A panic while holding the lock leaves a consistent map (no operation panics midway).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<K: Hash + Eq + Clone, V> Entries<K, V> {
    /// Drops the oldest entries until one slot is free.
    fn make_room(&mut self, capacity: usize) {
        while self.map.len() >= capacity {
            let Some((key, number)) = self.order.pop_front() else {
                // `order` lists every key in `map`; nothing left means the map is empty.
                return;
            };
            if self.map.get(&key).is_some_and(|entry| entry.2 == number) {
                self.map.remove(&key);
            }
        }
    }

    /// Removes the entries of `order` that no longer name the key's current version.
    fn drop_stale_order(&mut self) {
        let map = &self.map;
        self.order
            .retain(|(key, number)| map.get(key).is_some_and(|entry| entry.2 == *number));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_lives_its_ttl_and_no_longer() {
        let cache = TtlCache::new(10, Duration::from_secs(5));
        let now = Instant::now();
        cache.insert("a", 1, now, None);
        assert_eq!(cache.get(&"a", now + Duration::from_secs(4)), Some(1));
        assert_eq!(cache.get(&"a", now + Duration::from_secs(5)), None);
    }

    #[test]
    fn an_earlier_deadline_shortens_the_entry() {
        let cache = TtlCache::new(10, Duration::from_secs(60));
        let now = Instant::now();
        cache.insert("token", 1, now, Some(now + Duration::from_secs(2)));
        assert_eq!(cache.get(&"token", now + Duration::from_secs(1)), Some(1));
        assert_eq!(cache.get(&"token", now + Duration::from_secs(2)), None);
    }

    #[test]
    fn a_full_cache_drops_its_oldest_entry() {
        let cache = TtlCache::new(3, Duration::from_secs(60));
        let now = Instant::now();
        for (i, key) in ["a", "b", "c", "d"].into_iter().enumerate() {
            cache.insert(key, i, now, None);
        }
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&"a", now), None);
        assert_eq!(cache.get(&"d", now), Some(3));
    }

    #[test]
    fn reinserting_a_key_keeps_the_bound_and_the_newest_value() {
        let cache = TtlCache::new(2, Duration::from_secs(60));
        let now = Instant::now();
        for i in 0..1000 {
            cache.insert("same", i, now, None);
        }
        cache.insert("other", 0, now, None);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&"same", now), Some(999));
        cache.insert("third", 0, now, None);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&"same", now), None, "the oldest key went first");
    }

    #[test]
    fn a_zero_capacity_cache_keeps_nothing() {
        let cache = TtlCache::new(0, Duration::from_secs(60));
        cache.insert("a", 1, Instant::now(), None);
        assert_eq!(cache.len(), 0);
    }
}
