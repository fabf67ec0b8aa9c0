//! The retained-message index: one value per topic name, found for a new subscription by
//! walking a topic trie with the subscription's filter (never by scanning every topic), or
//! step by step in topic order from a saved position ([`RetainedStore::next_after`],
//! `retained_order.rs`), for a delivery that resumes as its connection drains.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::filter::TopicFilter;
use crate::index::byte_levels;
use crate::topic::{TopicName, split_level};
use crate::trie::{LevelTrie, NodeId, NodeValue, ROOT};

#[derive(Debug, Clone)]
struct RetainedEntry<V> {
    topic: TopicName,
    value: V,
    size: usize,
}

#[derive(Debug, Clone)]
struct Slot<V>(Option<RetainedEntry<V>>);

impl<V> Default for Slot<V> {
    fn default() -> Self {
        Self(None)
    }
}

impl<V> NodeValue for Slot<V> {
    fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// Retained messages by topic name. `V` is whatever the broker keeps per retained message
/// (typically a handle or the message itself).
///
/// [`Self::total_bytes`] adds up, for every stored topic, the topic's length plus the `size`
/// given when it was stored (e.g. the payload and properties), for the broker's retained-bytes
/// limit.
#[derive(Debug, Clone)]
pub struct RetainedStore<V> {
    trie: LevelTrie<Slot<V>>,
    /// Every stored topic in byte order (the key shares the entry's topic allocation), with
    /// its node: where an ordered walk resumes.
    pub(crate) in_order: BTreeMap<Bytes, NodeId>,
    count: usize,
    bytes: usize,
}

impl<V> Default for RetainedStore<V> {
    fn default() -> Self {
        Self {
            trie: LevelTrie::default(),
            in_order: BTreeMap::new(),
            count: 0,
            bytes: 0,
        }
    }
}

impl<V> RetainedStore<V> {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `visit` with every stored topic and value (in no particular order).
    pub fn for_each<'s>(&'s self, mut visit: impl FnMut(&'s TopicName, &'s V)) {
        let mut pending = vec![ROOT];
        while let Some(id) = pending.pop() {
            if let Some(entry) = &self.trie.value(id).0 {
                visit(&entry.topic, &entry.value);
            }
            self.trie.for_each_child(id, |_, child| pending.push(child));
        }
    }

    /// Stores `value` as the retained message of `topic`, replacing and returning the previous
    /// one. `size` is what the value counts towards [`Self::total_bytes`]. The topic is copied
    /// into its own allocation.
    pub fn store(&mut self, topic: &TopicName, value: V, size: usize) -> Option<V> {
        let id = self.trie.find_or_insert(byte_levels(topic.as_bytes()));
        let entry = RetainedEntry {
            topic: topic.detached(),
            value,
            size,
        };
        let key = entry.topic.to_bytes();
        let previous = self.trie.value_mut(id).0.replace(entry);
        self.bytes += topic.len() + size;
        match previous {
            Some(old) => {
                self.bytes -= old.topic.len() + old.size;
                Some(old.value)
            }
            None => {
                self.in_order.insert(key, id);
                self.count += 1;
                None
            }
        }
    }

    /// Clears the retained message of `topic` (a retained PUBLISH with an empty payload),
    /// returning it.
    pub fn remove(&mut self, topic: &TopicName) -> Option<V> {
        let id = self.trie.find(byte_levels(topic.as_bytes()))?;
        let old = self.trie.value_mut(id).0.take()?;
        self.trie.prune(byte_levels(topic.as_bytes()));
        self.in_order.remove(topic.as_bytes());
        self.count -= 1;
        self.bytes -= old.topic.len() + old.size;
        Some(old.value)
    }

    /// The topic and value stored at node `id`, if any.
    pub(crate) fn entry_at(&self, id: NodeId) -> Option<(&TopicName, &V)> {
        self.trie.value(id).0.as_ref().map(|e| (&e.topic, &e.value))
    }

    /// The retained message of exactly `topic`.
    pub fn get(&self, topic: &TopicName) -> Option<&V> {
        let id = self.trie.find(byte_levels(topic.as_bytes()))?;
        self.trie.value(id).0.as_ref().map(|e| &e.value)
    }

    /// Number of retained messages.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no message is retained.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Topic lengths plus the sizes given to [`Self::store`], over all retained messages.
    pub fn total_bytes(&self) -> usize {
        self.bytes
    }

    /// The retained messages whose topics match `filter` (MQTT 4.7, `$` rule included), found
    /// by walking only the trie branches the filter can reach. Order is unspecified.
    pub fn matching<'a>(&'a self, filter: &'a TopicFilter) -> RetainedMatches<'a, V> {
        RetainedMatches {
            store: self,
            filter: filter.as_bytes(),
            stack: vec![Walk::Filter(ROOT, 0)],
        }
    }
}

/// Marks a filter position past its last level.
const PAST_END: usize = usize::MAX;

#[derive(Debug, Clone, Copy)]
enum Walk {
    /// At a node with the filter's remaining levels starting at the offset.
    Filter(NodeId, usize),
    /// At a node under a `#`: the node and all its descendants match.
    Subtree(NodeId),
}

/// Iterator over the retained messages matching a filter: `(topic, value)` pairs.
#[derive(Debug)]
pub struct RetainedMatches<'a, V> {
    store: &'a RetainedStore<V>,
    filter: &'a [u8],
    stack: Vec<Walk>,
}

impl<'a, V> RetainedMatches<'a, V> {
    /// Pushes the children of `id` (all of them, or all but `$` ones at the root).
    fn push_children(&mut self, id: NodeId, walk: impl Fn(NodeId) -> Walk) {
        let trie = &self.store.trie;
        let stack = &mut self.stack;
        trie.for_each_child(id, |level, child| {
            if !(id == ROOT && level.first() == Some(&b'$')) {
                stack.push(walk(child));
            }
        });
    }

    fn entry(&self, id: NodeId) -> Option<(&'a TopicName, &'a V)> {
        self.store.entry_at(id)
    }

    /// Expands one walk step; returns the entry at the node if the node itself matches.
    fn step(&mut self, walk: Walk) -> Option<(&'a TopicName, &'a V)> {
        let (id, position) = match walk {
            Walk::Subtree(id) => {
                self.push_children(id, Walk::Subtree);
                return self.entry(id);
            }
            Walk::Filter(id, position) => (id, position),
        };
        if position == PAST_END {
            return self.entry(id);
        }
        let (level, rest) = split_level(&self.filter[position..]);
        let next = rest.map_or(PAST_END, |r| self.filter.len() - r.len());
        match level {
            b"#" => {
                // "a/#" also matches "a"; the root never holds a value (names are non-empty).
                self.push_children(id, Walk::Subtree);
                return self.entry(id);
            }
            b"+" => self.push_children(id, |child| Walk::Filter(child, next)),
            _ => {
                if let Some(child) = self.store.trie.child(id, level) {
                    self.stack.push(Walk::Filter(child, next));
                }
            }
        }
        None
    }
}

impl<'a, V> Iterator for RetainedMatches<'a, V> {
    type Item = (&'a TopicName, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        while let Some(walk) = self.stack.pop() {
            if let Some(found) = self.step(walk) {
                return Some(found);
            }
        }
        None
    }
}
