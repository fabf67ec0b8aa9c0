//! A map from topic filters to values with topic matching: filters without wildcards live in a
//! hash map (one lookup per match), wildcard filters in a level trie walked by the topic.

use std::collections::HashMap;

use ahash::RandomState;
use smallvec::SmallVec;

use crate::filter::TopicFilter;
use crate::topic::{TopicName, split_level};
use crate::trie::{LevelTrie, NodeId, NodeValue, ROOT};

/// Marks a trie walk position past the last level of the topic.
const PAST_END: usize = usize::MAX;

/// Scratch space for trie walks, kept by the caller so that a match does not allocate.
pub(crate) type WalkStack = Vec<(NodeId, usize)>;

/// The exact hash map keeps at most this many times more slots than entries before it shrinks
/// after removals. A tuning constant, not a limit.
const EXACT_SHRINK_FACTOR: usize = 4;

/// The levels of a validated topic or filter as byte slices (empty levels included).
pub(crate) fn byte_levels(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|&b| b == b'/')
}

/// An exact filter as a hash-map key: up to 24 bytes are stored inline in the bucket, so that
/// comparing the key on a hit costs no extra cache miss.
type ExactKey = SmallVec<[u8; 24]>;

/// Filters to values, exact ones hashed, wildcard ones in a trie.
#[derive(Debug, Clone)]
pub(crate) struct FilterIndex<T> {
    exact: HashMap<ExactKey, T, RandomState>,
    wildcard: LevelTrie<T>,
}

impl<T: NodeValue> Default for FilterIndex<T> {
    fn default() -> Self {
        Self {
            exact: HashMap::default(),
            wildcard: LevelTrie::default(),
        }
    }
}

impl<T: NodeValue> FilterIndex<T> {
    /// The value for `filter`, inserted empty when missing.
    pub(crate) fn entry(&mut self, filter: &TopicFilter) -> &mut T {
        let key = filter.as_bytes();
        if filter.has_wildcards() {
            let id = self.wildcard.find_or_insert(byte_levels(key));
            return self.wildcard.value_mut(id);
        }
        if !self.exact.contains_key(key) {
            self.exact.insert(ExactKey::from_slice(key), T::default());
        }
        self.exact
            .get_mut(key)
            .expect("invariant: inserted just above when missing")
    }

    /// The value for `filter`, if present.
    pub(crate) fn get(&self, filter: &TopicFilter) -> Option<&T> {
        let key = filter.as_bytes();
        if filter.has_wildcards() {
            let id = self.wildcard.find(byte_levels(key))?;
            return Some(self.wildcard.value(id));
        }
        self.exact.get(key)
    }

    /// The value for `filter`, mutably, if present.
    pub(crate) fn get_mut(&mut self, filter: &TopicFilter) -> Option<&mut T> {
        let key = filter.as_bytes();
        if filter.has_wildcards() {
            let id = self.wildcard.find(byte_levels(key))?;
            return Some(self.wildcard.value_mut(id));
        }
        self.exact.get_mut(key)
    }

    /// Drops the storage of `filter` when its value has become empty.
    pub(crate) fn remove_if_empty(&mut self, filter: &TopicFilter) {
        let key = filter.as_bytes();
        if filter.has_wildcards() {
            self.wildcard.prune(byte_levels(key));
            return;
        }
        if self.exact.get(key).is_some_and(T::is_empty) {
            self.exact.remove(key);
            let len = self.exact.len();
            if self.exact.capacity() > EXACT_SHRINK_FACTOR * (len + 1) {
                self.exact.shrink_to(2 * len);
            }
        }
    }

    /// Calls `visit` with the value of every filter that matches `topic` (MQTT 4.7, with the `$`
    /// rule): first the exact filter, then wildcard filters in trie order. Allocation-free once
    /// `stack` has grown to the deepest walk.
    pub(crate) fn for_each_match(
        &mut self,
        topic: &TopicName,
        stack: &mut WalkStack,
        mut visit: impl FnMut(&mut T),
    ) {
        let name = topic.as_bytes();
        if let Some(value) = self.exact.get_mut(name) {
            visit(value);
        }
        let dollar = topic.is_dollar();
        stack.clear();
        stack.push((ROOT, 0));
        while let Some((id, position)) = stack.pop() {
            let wildcards_allowed = !(dollar && id == ROOT);
            if wildcards_allowed && let Some(hash) = self.wildcard.child(id, b"#") {
                visit(self.wildcard.value_mut(hash));
            }
            if position == PAST_END {
                visit(self.wildcard.value_mut(id));
                continue;
            }
            let (level, rest) = split_level(&name[position..]);
            let next = rest.map_or(PAST_END, |r| name.len() - r.len());
            if let Some(child) = self.wildcard.child(id, level) {
                stack.push((child, next));
            }
            if wildcards_allowed && let Some(plus) = self.wildcard.child(id, b"+") {
                stack.push((plus, next));
            }
        }
    }

    /// Calls `f` with every filter (as text) and its value, in no particular order.
    pub(crate) fn for_each_filter(&self, mut f: impl FnMut(&str, &T)) {
        for (key, value) in &self.exact {
            f(utf8(key), value);
        }
        let mut text = String::new();
        self.wildcard.for_each_value(|levels, value| {
            text.clear();
            for (i, level) in levels.iter().enumerate() {
                if i > 0 {
                    text.push('/');
                }
                text.push_str(utf8(level));
            }
            f(&text, value);
        });
    }

    /// Number of exact filters stored.
    pub(crate) fn exact_len(&self) -> usize {
        self.exact.len()
    }

    /// Number of live wildcard trie nodes (the root included).
    pub(crate) fn trie_nodes(&self) -> usize {
        self.wildcard.node_count()
    }
}

fn utf8(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("invariant: keys are levels of validated filters")
}
