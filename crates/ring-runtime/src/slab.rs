//! A generational slab: dense `u32` indices, reused after removal, each reuse bumping the
//! slot's generation so an old `(index, generation)` pair never matches the new occupant.
//! Used for connections, timers and in-flight io_uring operations.
//!
//! Slots live in fixed-size chunks ([`ChunkedVec`]): growing by one chunk never moves what is
//! stored, so there is no copy of the whole table and no freed half-size block left behind
//! when a burst of connections grows it (a contiguous vector would leave the allocator holding
//! every smaller generation of the table).

/// Entries per chunk of a [`ChunkedVec`] (a few KiB to tens of KiB per chunk for the records
/// kept here).
const CHUNK: usize = 256;

/// A vector stored in fixed-size chunks. Indexing costs one extra (cached) pointer load;
/// pushing never reallocates stored entries.
pub(crate) struct ChunkedVec<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> ChunkedVec<T> {
    /// An empty vector (allocates nothing).
    pub(crate) const fn new() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }

    /// Entries stored.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends `value` at index `len()`.
    pub(crate) fn push(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(value),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// Removes the last entry; a chunk left empty is freed.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let chunk = self.chunks.last_mut()?;
        let value = chunk.pop();
        if chunk.is_empty() {
            self.chunks.pop();
        }
        self.len -= usize::from(value.is_some());
        value
    }

    /// The entry at `index`.
    pub(crate) fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index / CHUNK)?.get(index % CHUNK)
    }

    /// The entry at `index`, for changes.
    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.chunks.get_mut(index / CHUNK)?.get_mut(index % CHUNK)
    }

    /// The last entry.
    pub(crate) fn last(&self) -> Option<&T> {
        self.chunks.last()?.last()
    }

    /// Every entry, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

/// One slot: its current generation and, when occupied, the value.
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// The slab. `insert`, `get`, `remove` are O(1).
pub(crate) struct GenSlab<T> {
    slots: ChunkedVec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> GenSlab<T> {
    /// An empty slab.
    pub(crate) fn new() -> Self {
        Self {
            slots: ChunkedVec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Stores `value`, returning `(index, generation)`.
    pub(crate) fn insert(&mut self, value: T) -> (u32, u32) {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let slot = self
                .slots
                .get_mut(index as usize)
                .expect("invariant: free indices are below the slot count");
            slot.generation = slot.generation.wrapping_add(1);
            slot.value = Some(value);
            return (index, slot.generation);
        }
        let index = u32::try_from(self.slots.len()).expect("invariant: fewer than 2^32 slots");
        self.slots.push(Slot {
            generation: 0,
            value: Some(value),
        });
        (index, 0)
    }

    /// The value at `index` if its generation matches.
    pub(crate) fn get(&self, index: u32, generation: u32) -> Option<&T> {
        let slot = self.slots.get(index as usize)?;
        if slot.generation == generation {
            slot.value.as_ref()
        } else {
            None
        }
    }

    /// Mutable access to the value at `index` if its generation matches.
    pub(crate) fn get_mut(&mut self, index: u32, generation: u32) -> Option<&mut T> {
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation == generation {
            slot.value.as_mut()
        } else {
            None
        }
    }

    /// Mutable access by index alone (for intrusive links inside one owner).
    pub(crate) fn get_by_index_mut(&mut self, index: u32) -> Option<&mut T> {
        self.slots.get_mut(index as usize)?.value.as_mut()
    }

    /// Generation of an occupied slot.
    pub(crate) fn generation_of(&self, index: u32) -> Option<u32> {
        let slot = self.slots.get(index as usize)?;
        slot.value.as_ref().map(|_| slot.generation)
    }

    /// Removes and returns the value if the generation matches.
    pub(crate) fn remove(&mut self, index: u32, generation: u32) -> Option<T> {
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        self.free.push(index);
        self.len -= 1;
        Some(value)
    }

    /// Occupied slots.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// `(index, generation)` of every occupied slot.
    pub(crate) fn keys(&self) -> Vec<(u32, u32)> {
        let mut keys = Vec::with_capacity(self.len);
        for (index, slot) in self.slots.iter().enumerate() {
            if slot.value.is_some() {
                let index = u32::try_from(index).expect("invariant: fewer than 2^32 slots");
                keys.push((index, slot.generation));
            }
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_never_reach_a_reused_slot() {
        let mut slab = GenSlab::new();
        let (a, ga) = slab.insert("a");
        assert_eq!(slab.remove(a, ga), Some("a"));
        let (b, gb) = slab.insert("b");
        assert_eq!(a, b, "slot is reused");
        assert_ne!(ga, gb);
        assert_eq!(slab.get(a, ga), None);
        assert_eq!(slab.remove(a, ga), None);
        assert_eq!(slab.get(b, gb), Some(&"b"));
        assert_eq!(slab.len(), 1);
        assert_eq!(slab.keys(), vec![(b, gb)]);
        assert_eq!(slab.generation_of(b), Some(gb));
    }

    #[test]
    fn many_inserts_and_removes_keep_len() {
        let mut slab = GenSlab::new();
        let keys: Vec<_> = (0..100).map(|i| slab.insert(i)).collect();
        for (i, (index, generation)) in keys.iter().enumerate() {
            if i % 2 == 0 {
                assert_eq!(slab.remove(*index, *generation), Some(i));
            }
        }
        assert_eq!(slab.len(), 50);
        *slab.get_mut(keys[1].0, keys[1].1).unwrap() = 1000;
        assert_eq!(slab.get(keys[1].0, keys[1].1), Some(&1000));
    }

    #[test]
    fn chunked_vec_spans_chunks_and_frees_emptied_ones() {
        let mut v = ChunkedVec::new();
        for i in 0..(2 * CHUNK + 3) {
            v.push(i);
        }
        assert_eq!(v.len(), 2 * CHUNK + 3);
        assert_eq!(v.chunks.len(), 3);
        assert_eq!(v.get(CHUNK), Some(&CHUNK));
        assert_eq!(v.get(2 * CHUNK + 3), None);
        *v.get_mut(CHUNK - 1).unwrap() = 7;
        assert_eq!(v.iter().nth(CHUNK - 1), Some(&7));
        for _ in 0..4 {
            v.pop();
        }
        assert_eq!(v.chunks.len(), 2, "the emptied last chunk is freed");
        assert_eq!(v.last(), Some(&(2 * CHUNK - 2)));
        assert!(
            v.chunks.iter().all(|c| c.capacity() == CHUNK),
            "chunks never grow"
        );
    }

    #[test]
    fn slab_indices_stay_dense_across_chunks() {
        let mut slab = GenSlab::new();
        let keys: Vec<_> = (0..3 * CHUNK).map(|i| slab.insert(i)).collect();
        assert_eq!(keys.last(), Some(&((3 * CHUNK - 1) as u32, 0)));
        for (i, (index, generation)) in keys.iter().enumerate() {
            assert_eq!(slab.get(*index, *generation), Some(&i));
        }
    }
}
