//! An arena trie keyed by topic levels, shared by the wildcard filter index and the retained
//! index. Nodes live in one `Vec` and refer to each other by 32-bit index; emptied nodes are
//! pruned and their slots reused.

use std::collections::HashMap;

use ahash::RandomState;
use smallvec::SmallVec;

/// Index of a node in the arena. The root is 0, which is never anyone's child, so 0 also means
/// "no child" in the wildcard slots.
pub(crate) type NodeId = u32;

/// The root node.
pub(crate) const ROOT: NodeId = 0;

/// A child list stays a linear-scanned vector up to this many entries (cheaper in memory and as
/// fast as hashing for a handful of short keys), then becomes a hash map. A tuning constant, not
/// a limit.
const SMALL_CHILDREN_MAX: usize = 8;

/// What a node stores: it can tell when it holds nothing, so that the node can be pruned.
pub(crate) trait NodeValue: Default {
    /// Whether the value holds nothing.
    fn is_empty(&self) -> bool;
}

/// A level as a child key: up to 16 bytes inline, so that scanning a child list does not chase a
/// pointer per entry.
type LevelKey = SmallVec<[u8; 16]>;

/// A node's literal children. The map is boxed so that the common small case costs 24 bytes.
#[derive(Debug, Clone)]
enum Children {
    Small(Vec<(LevelKey, NodeId)>),
    #[expect(
        clippy::box_collection,
        reason = "boxed, the map costs 8 bytes in the enum; unboxed, 48 in every node"
    )]
    Large(Box<HashMap<LevelKey, NodeId, RandomState>>),
}

impl Children {
    fn get(&self, level: &[u8]) -> Option<NodeId> {
        match self {
            Self::Small(list) => list.iter().find(|(k, _)| **k == *level).map(|(_, id)| *id),
            Self::Large(map) => map.get(level).copied(),
        }
    }

    fn insert(&mut self, level: &[u8], id: NodeId) {
        match self {
            Self::Small(list) if list.len() < SMALL_CHILDREN_MAX => {
                // Grow one slot at a time: most nodes have one or two children.
                list.reserve_exact(1);
                list.push((LevelKey::from_slice(level), id));
            }
            Self::Small(list) => {
                let mut map: HashMap<_, _, _> = list.drain(..).collect();
                map.insert(LevelKey::from_slice(level), id);
                *self = Self::Large(Box::new(map));
            }
            Self::Large(map) => {
                map.insert(LevelKey::from_slice(level), id);
            }
        }
    }

    fn remove(&mut self, level: &[u8]) {
        match self {
            Self::Small(list) => list.retain(|(k, _)| **k != *level),
            Self::Large(map) => {
                map.remove(level);
            }
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Self::Small(list) => list.is_empty(),
            Self::Large(map) => map.is_empty(),
        }
    }

    fn for_each<'s>(&'s self, mut f: impl FnMut(&'s [u8], NodeId)) {
        match self {
            Self::Small(list) => list.iter().for_each(|(k, id)| f(k, *id)),
            Self::Large(map) => map.iter().for_each(|(k, id)| f(k, *id)),
        }
    }
}

#[derive(Debug, Clone)]
struct Node<T> {
    /// Children by literal level (never `+` or `#`).
    children: Children,
    /// The `+` child, 0 when none.
    plus: NodeId,
    /// The `#` child, 0 when none.
    hash: NodeId,
    value: T,
}

impl<T: Default> Default for Node<T> {
    fn default() -> Self {
        Self {
            children: Children::Small(Vec::new()),
            plus: 0,
            hash: 0,
            value: T::default(),
        }
    }
}

impl<T> Node<T> {
    fn is_leaf(&self) -> bool {
        self.children.is_empty() && self.plus == 0 && self.hash == 0
    }
}

/// Nodes per arena chunk (a power of two). A tuning constant, not a limit.
const CHUNK_BITS: u32 = 10;
const CHUNK_LEN: usize = 1 << CHUNK_BITS;

/// Nodes in fixed-size chunks: growing never copies nodes and wastes at most one partly filled
/// chunk, where one doubling `Vec` would leave up to half its capacity unused.
#[derive(Debug, Clone)]
struct NodeArena<T> {
    chunks: Vec<Vec<Node<T>>>,
    len: usize,
}

impl<T: NodeValue> NodeArena<T> {
    fn push(&mut self, node: Node<T>) -> NodeId {
        if self.len.is_multiple_of(CHUNK_LEN) {
            self.chunks.push(Vec::with_capacity(CHUNK_LEN));
        }
        self.chunks
            .last_mut()
            .expect("invariant: a chunk with room was pushed above")
            .push(node);
        self.len += 1;
        NodeId::try_from(self.len - 1).expect("invariant: fewer than 2^32 trie nodes")
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl<T> std::ops::Index<NodeId> for NodeArena<T> {
    type Output = Node<T>;

    #[inline]
    fn index(&self, id: NodeId) -> &Node<T> {
        &self.chunks[(id >> CHUNK_BITS) as usize][id as usize & (CHUNK_LEN - 1)]
    }
}

impl<T> std::ops::IndexMut<NodeId> for NodeArena<T> {
    #[inline]
    fn index_mut(&mut self, id: NodeId) -> &mut Node<T> {
        &mut self.chunks[(id >> CHUNK_BITS) as usize][id as usize & (CHUNK_LEN - 1)]
    }
}

/// The arena trie.
#[derive(Debug, Clone)]
pub(crate) struct LevelTrie<T> {
    nodes: NodeArena<T>,
    free: Vec<NodeId>,
}

impl<T: NodeValue> Default for LevelTrie<T> {
    fn default() -> Self {
        let mut nodes = NodeArena {
            chunks: Vec::new(),
            len: 0,
        };
        nodes.push(Node::default());
        Self {
            nodes,
            free: Vec::new(),
        }
    }
}

fn some_child(id: NodeId) -> Option<NodeId> {
    (id != 0).then_some(id)
}

impl<T: NodeValue> LevelTrie<T> {
    /// The child of `id` for `level` (`+` and `#` address the wildcard slots).
    #[inline]
    pub(crate) fn child(&self, id: NodeId, level: &[u8]) -> Option<NodeId> {
        let node = &self.nodes[id];
        match level {
            b"+" => some_child(node.plus),
            b"#" => some_child(node.hash),
            _ => node.children.get(level),
        }
    }

    /// The value stored at `id`.
    #[inline]
    pub(crate) fn value(&self, id: NodeId) -> &T {
        &self.nodes[id].value
    }

    /// The value stored at `id`, mutably.
    #[inline]
    pub(crate) fn value_mut(&mut self, id: NodeId) -> &mut T {
        &mut self.nodes[id].value
    }

    /// Calls `f` for every child of `id` with its level (wildcard children as `+` and `#`).
    pub(crate) fn for_each_child<'s>(&'s self, id: NodeId, mut f: impl FnMut(&'s [u8], NodeId)) {
        let node = &self.nodes[id];
        node.children.for_each(&mut f);
        if let Some(plus) = some_child(node.plus) {
            f(b"+", plus);
        }
        if let Some(hash) = some_child(node.hash) {
            f(b"#", hash);
        }
    }

    /// The node for the path `levels`, if it exists.
    pub(crate) fn find<'a>(&self, mut levels: impl Iterator<Item = &'a [u8]>) -> Option<NodeId> {
        levels.try_fold(ROOT, |id, level| self.child(id, level))
    }

    /// The node for the path `levels`, creating missing nodes.
    pub(crate) fn find_or_insert<'a>(&mut self, levels: impl Iterator<Item = &'a [u8]>) -> NodeId {
        let mut id = ROOT;
        for level in levels {
            id = match self.child(id, level) {
                Some(child) => child,
                None => self.add_child(id, level),
            };
        }
        id
    }

    fn add_child(&mut self, parent: NodeId, level: &[u8]) -> NodeId {
        let child = match self.free.pop() {
            Some(reused) => reused,
            None => self.nodes.push(Node::default()),
        };
        let node = &mut self.nodes[parent];
        match level {
            b"+" => node.plus = child,
            b"#" => node.hash = child,
            _ => node.children.insert(level, child),
        }
        child
    }

    /// Removes the nodes along `levels` that hold nothing and have no children, deepest first.
    pub(crate) fn prune<'a>(&mut self, levels: impl Iterator<Item = &'a [u8]>) {
        let mut path: Vec<(NodeId, &[u8])> = Vec::new();
        let mut id = ROOT;
        for level in levels {
            match self.child(id, level) {
                Some(child) => {
                    path.push((id, level));
                    id = child;
                }
                None => return,
            }
        }
        while let Some((parent, level)) = path.pop() {
            let node = &self.nodes[id];
            if !(node.is_leaf() && node.value.is_empty()) {
                return;
            }
            self.nodes[id] = Node::default();
            self.free.push(id);
            let parent_node = &mut self.nodes[parent];
            match level {
                b"+" => parent_node.plus = 0,
                b"#" => parent_node.hash = 0,
                _ => parent_node.children.remove(level),
            }
            id = parent;
        }
    }

    /// Number of live nodes, the root included.
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// Calls `f` with the levels leading to every node whose value is not empty.
    pub(crate) fn for_each_value(&self, mut f: impl FnMut(&[&[u8]], &T)) {
        let mut path: Vec<&[u8]> = Vec::new();
        let mut stack: Vec<(NodeId, usize, &[u8])> = vec![(ROOT, 0, b"")];
        while let Some((id, depth, level)) = stack.pop() {
            path.truncate(depth.saturating_sub(1));
            if depth > 0 {
                path.push(level);
            }
            let value = self.value(id);
            if !value.is_empty() {
                f(&path, value);
            }
            self.for_each_child(id, |level, child| stack.push((child, depth + 1, level)));
        }
    }
}
