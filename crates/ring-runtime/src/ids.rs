//! Compact identifiers: connections, shards and timers.

use std::fmt;

/// A connection on one shard: slab index plus generation, so a stale id never reaches a
/// reused slot. 8 bytes, `Copy`. Meaningful only on the shard that handed it out.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId {
    index: u32,
    generation: u32,
}

impl ConnId {
    pub(crate) const fn new(index: u32, generation: u32) -> Self {
        Self { index, generation }
    }

    /// Slot index in the shard's connection table (dense, reused after close).
    pub const fn index(self) -> u32 {
        self.index
    }

    /// Generation of the slot when this id was handed out.
    pub const fn generation(self) -> u32 {
        self.generation
    }

    /// Packs the id into a `u64` (index in the low half), e.g. for timer keys.
    pub const fn to_u64(self) -> u64 {
        (self.generation as u64) << 32 | self.index as u64
    }

    /// Inverse of [`ConnId::to_u64`].
    pub const fn from_u64(packed: u64) -> Self {
        Self {
            index: packed as u32,
            generation: (packed >> 32) as u32,
        }
    }
}

impl fmt::Debug for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}.{}", self.index, self.generation)
    }
}

/// Index of a shard (one thread, one ring), `0..shard_count`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct ShardId(u16);

impl ShardId {
    /// The shard with this index.
    pub const fn new(index: u16) -> Self {
        Self(index)
    }

    /// The index as `usize`, for indexing per-shard arrays.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A timer armed on a shard's wheel; stale after it fires or is cancelled.
///
/// Its slab index is kept plus one, so that `Option<TimerId>` is 8 bytes (a handler's
/// per-connection record keeps one).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TimerId {
    slot: std::num::NonZeroU32,
    generation: u32,
}

impl TimerId {
    pub(crate) fn new(index: u32, generation: u32) -> Self {
        let slot = std::num::NonZeroU32::new(index.wrapping_add(1))
            .expect("invariant: a timer slab never holds 2^32 entries");
        Self { slot, generation }
    }

    pub(crate) fn index(self) -> u32 {
        self.slot.get() - 1
    }

    pub(crate) fn generation(self) -> u32 {
        self.generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_id_round_trips_through_u64() {
        let id = ConnId::new(7, 0xdead_beef);
        assert_eq!(ConnId::from_u64(id.to_u64()), id);
        assert_eq!(std::mem::size_of::<ConnId>(), 8);
        assert_eq!(format!("{id:?}"), "conn#7.3735928559");
    }

    #[test]
    fn an_optional_timer_id_takes_no_more_room_than_one() {
        assert_eq!(std::mem::size_of::<Option<TimerId>>(), 8);
        let id = TimerId::new(0, 5);
        assert_eq!((id.index(), id.generation()), (0, 5));
    }
}
