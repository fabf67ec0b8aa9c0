//! A double-ended queue that costs one pointer while empty: idle sessions are the common case,
//! so their inflight window, queue and QoS 2 ids hold no memory beyond that pointer.

use std::collections::VecDeque;

/// Room a deque is allocated with on its first push.
const FIRST_CAPACITY: usize = 4;

/// A `VecDeque` allocated on first push and freed when it becomes empty again.
#[derive(Debug)]
#[expect(
    clippy::box_collection,
    reason = "boxed, an empty deque costs 8 bytes inline instead of 32: idle sessions hold three"
)]
pub(crate) struct LazyDeque<T>(Option<Box<VecDeque<T>>>);

impl<T> Default for LazyDeque<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<T> LazyDeque<T> {
    pub(crate) fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |d| d.len())
    }

    /// Whether it holds nothing: an emptied deque is freed, so without reading it.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter().flat_map(|d| d.iter())
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.0.iter_mut().flat_map(|d| d.iter_mut())
    }

    pub(crate) fn get(&self, at: usize) -> Option<&T> {
        self.0.as_ref()?.get(at)
    }

    pub(crate) fn get_mut(&mut self, at: usize) -> Option<&mut T> {
        self.0.as_mut()?.get_mut(at)
    }

    pub(crate) fn position(&self, pred: impl FnMut(&T) -> bool) -> Option<usize> {
        self.0.as_ref()?.iter().position(pred)
    }

    pub(crate) fn push_back(&mut self, item: T) {
        // Allocated at the size its first growth would give it (a general path avoided).
        self.0
            .get_or_insert_with(|| Box::new(VecDeque::with_capacity(FIRST_CAPACITY)))
            .push_back(item);
    }

    pub(crate) fn remove(&mut self, at: usize) -> Option<T> {
        let item = self.0.as_mut()?.remove(at);
        self.free_if_empty();
        item
    }

    /// Takes every item out, leaving the deque empty (and unallocated).
    pub(crate) fn take_all(&mut self) -> VecDeque<T> {
        self.0.take().map(|d| *d).unwrap_or_default()
    }

    /// Puts back items taken with [`Self::take_all`] (nothing is allocated for none).
    pub(crate) fn restore(&mut self, items: VecDeque<T>) {
        self.0 = (!items.is_empty()).then(|| Box::new(items));
    }

    fn free_if_empty(&mut self) {
        if self.0.as_ref().is_some_and(|d| d.is_empty()) {
            self.0 = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_only_while_holding_items() {
        let mut d = LazyDeque::default();
        assert!(d.0.is_none());
        d.push_back(0);
        d.push_back(1);
        assert_eq!(d.iter().copied().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(d.remove(1), Some(1));
        assert_eq!(d.remove(0), Some(0));
        assert!(d.0.is_none(), "emptied deque is freed");
        assert_eq!(std::mem::size_of::<LazyDeque<[u8; 64]>>(), 8);
    }
}
