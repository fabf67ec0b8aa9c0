//! A generational slab: dense `u32` indices, reused after removal, each reuse bumping the
//! slot's generation so an old `(index, generation)` pair never matches the new occupant.
//! Used for connections, timers and in-flight io_uring operations.

/// One slot: its current generation and, when occupied, the value.
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// The slab. `insert`, `get`, `remove` are O(1).
pub(crate) struct GenSlab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> GenSlab<T> {
    /// An empty slab.
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Stores `value`, returning `(index, generation)`.
    pub(crate) fn insert(&mut self, value: T) -> (u32, u32) {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
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
}
