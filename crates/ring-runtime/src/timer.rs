//! A per-shard hierarchical timer wheel: 6 levels of 64 slots (tick resolution from config,
//! 2^36 ticks of range; later deadlines are parked in the top level and re-slotted as time
//! passes). Entries live in a generational slab and are linked into their slot with intrusive
//! doubly-linked lists, so arm, reset and cancel are O(1). A 64-bit occupancy mask per level
//! finds the next expiry without scanning slots.
//!
//! The shard asks [`TimerWheel::next_deadline`] for its wait timeout (io_uring wait timeout or
//! `epoll_wait` timeout) and calls [`TimerWheel::advance`] once per turn.

use std::time::{Duration, Instant};

use crate::ids::TimerId;
use crate::slab::GenSlab;

const LEVEL_BITS: u32 = 6;
const SLOTS: usize = 1 << LEVEL_BITS;
const LEVELS: usize = 6;
const MAX_TICKS: u64 = 1 << (LEVEL_BITS as usize * LEVELS);
/// List index of the "already due" list (deadline at or before the wheel's current tick).
const DUE: usize = LEVELS * SLOTS;
const NIL: u32 = u32::MAX;
/// Bits of an entry's packed word that hold its list index (`DUE` fits).
const LIST_BITS: u32 = 9;
/// Latest representable deadline tick (later ones are clamped: with a 1 ms tick, over a
/// million years away).
const MAX_WHEN: u64 = (1 << (64 - LIST_BITS)) - 1;

/// One armed timer: 16 bytes of links and deadline besides its payload (one per connection
/// with a keep-alive, so it is kept small).
struct Entry<T> {
    payload: T,
    /// Deadline tick (high bits) and list index (low `LIST_BITS` bits).
    packed: u64,
    prev: u32,
    next: u32,
}

impl<T> Entry<T> {
    fn when(&self) -> u64 {
        self.packed >> LIST_BITS
    }

    fn list(&self) -> usize {
        (self.packed & ((1 << LIST_BITS) - 1)) as usize
    }

    fn set_when(&mut self, when: u64) {
        self.packed = (when.min(MAX_WHEN) << LIST_BITS) | self.list() as u64;
    }

    fn set_list(&mut self, list: usize) {
        debug_assert!(list <= DUE);
        self.packed = (self.when() << LIST_BITS) | list as u64;
    }
}

/// The wheel, generic over what a timer carries.
pub(crate) struct TimerWheel<T> {
    entries: GenSlab<Entry<T>>,
    heads: Vec<u32>,
    occupied: [u64; LEVELS],
    elapsed: u64,
    origin: Instant,
    tick: Duration,
    /// Scratch for [`TimerWheel::advance`]: the due entries' deadline ticks and indices.
    due: Vec<(u64, u32)>,
}

impl<T> TimerWheel<T> {
    /// An empty wheel whose tick 0 is `origin`.
    pub(crate) fn new(origin: Instant, tick: Duration) -> Self {
        Self {
            entries: GenSlab::new(),
            heads: vec![NIL; DUE + 1],
            occupied: [0; LEVELS],
            elapsed: 0,
            origin,
            tick,
            due: Vec::new(),
        }
    }

    /// Armed timers.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Arms a timer that fires at the first tick at or after `deadline`.
    pub(crate) fn insert(&mut self, deadline: Instant, payload: T) -> TimerId {
        let when = self.deadline_tick(deadline);
        let mut entry = Entry {
            payload,
            packed: DUE as u64,
            prev: NIL,
            next: NIL,
        };
        entry.set_when(when);
        let (index, generation) = self.entries.insert(entry);
        self.place(index);
        TimerId::new(index, generation)
    }

    /// Moves a live timer to a new deadline. `false` when the id is stale.
    pub(crate) fn reset(&mut self, id: TimerId, deadline: Instant) -> bool {
        let when = self.deadline_tick(deadline);
        let Some(entry) = self.entries.get_mut(id.index(), id.generation()) else {
            return false;
        };
        entry.set_when(when);
        self.unlink(id.index());
        self.place(id.index());
        true
    }

    /// Disarms a timer, returning its payload. `None` when the id is stale.
    pub(crate) fn cancel(&mut self, id: TimerId) -> Option<T> {
        self.entries.get(id.index(), id.generation())?;
        self.unlink(id.index());
        self.entries
            .remove(id.index(), id.generation())
            .map(|entry| entry.payload)
    }

    /// The earliest instant at which [`TimerWheel::advance`] has work (possibly a cascade),
    /// or `None` when no timer is armed.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        if self.heads[DUE] != NIL {
            return Some(self.tick_instant(self.elapsed));
        }
        self.next_expiry().map(|(_, tick)| self.tick_instant(tick))
    }

    /// Fires every timer whose deadline is at or before `now`, appending them to `fired` in
    /// deadline order (a shard that stalled past several deadlines fires them as they were
    /// due, not in slot order; equal ticks in no set order).
    pub(crate) fn advance(&mut self, now: Instant, fired: &mut Vec<(TimerId, T)>) {
        let now_tick = self.now_tick(now);
        while let Some((list, tick)) = self.next_expiry() {
            if tick > now_tick {
                break;
            }
            self.elapsed = self.elapsed.max(tick);
            let mut cursor = self.heads[list];
            while cursor != NIL {
                let next = self.link(cursor).next;
                self.unlink(cursor);
                self.place(cursor);
                cursor = next;
            }
        }
        self.elapsed = self.elapsed.max(now_tick);
        self.collect_due();
        for index in 0..self.due.len() {
            let cursor = self.due[index].1;
            self.unlink(cursor);
            let generation = self
                .entries
                .generation_of(cursor)
                .expect("invariant: linked timer entries are occupied");
            let entry = self
                .entries
                .remove(cursor, generation)
                .expect("invariant: generation read just above");
            fired.push((TimerId::new(cursor, generation), entry.payload));
        }
    }

    /// Fills `due` with the due list's entries, earliest deadline first.
    fn collect_due(&mut self) {
        self.due.clear();
        let mut cursor = self.heads[DUE];
        while cursor != NIL {
            let entry = self.link(cursor);
            let (when, next) = (entry.when(), entry.next);
            self.due.push((when, cursor));
            cursor = next;
        }
        self.due.sort_unstable();
    }

    fn link(&mut self, index: u32) -> &mut Entry<T> {
        self.entries
            .get_by_index_mut(index)
            .expect("invariant: linked timer entries are occupied")
    }

    /// Links an unlinked entry into the list its deadline belongs to.
    fn place(&mut self, index: u32) {
        let elapsed = self.elapsed;
        let when = self.link(index).when();
        let list = if when <= elapsed {
            DUE
        } else {
            let slotted = when.min(elapsed + MAX_TICKS - 1);
            let level = level_for(elapsed, slotted);
            let slot = (slotted >> (level as u32 * LEVEL_BITS)) as usize & (SLOTS - 1);
            self.occupied[level] |= 1 << slot;
            level * SLOTS + slot
        };
        let head = self.heads[list];
        let entry = self.link(index);
        entry.set_list(list);
        entry.prev = NIL;
        entry.next = head;
        if head != NIL {
            self.link(head).prev = index;
        }
        self.heads[list] = index;
    }

    fn unlink(&mut self, index: u32) {
        let (list, prev, next) = {
            let entry = self.link(index);
            (entry.list(), entry.prev, entry.next)
        };
        if prev == NIL {
            self.heads[list] = next;
        } else {
            self.link(prev).next = next;
        }
        if next != NIL {
            self.link(next).prev = prev;
        }
        if self.heads[list] == NIL && list != DUE {
            self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
        }
        let entry = self.link(index);
        entry.prev = NIL;
        entry.next = NIL;
    }

    /// The list and the start tick of the earliest occupied slot over all levels.
    fn next_expiry(&self) -> Option<(usize, u64)> {
        (0..LEVELS).find_map(|level| {
            let mask = self.occupied[level];
            if mask == 0 {
                return None;
            }
            let shift = level as u32 * LEVEL_BITS;
            let slot_range = 1u64 << shift;
            let level_range = slot_range << LEVEL_BITS;
            let now_slot = (self.elapsed >> shift) as u32 & (SLOTS as u32 - 1);
            let slot = (mask.rotate_right(now_slot).trailing_zeros() + now_slot) as usize % SLOTS;
            let level_start = self.elapsed & !(level_range - 1);
            let mut start = level_start + slot as u64 * slot_range;
            if start <= self.elapsed && level > 0 {
                start += level_range;
            }
            Some((level * SLOTS + slot, start.max(self.elapsed)))
        })
    }

    fn deadline_tick(&self, deadline: Instant) -> u64 {
        let since = deadline.saturating_duration_since(self.origin);
        let ticks = since.as_nanos().div_ceil(self.tick.as_nanos());
        u64::try_from(ticks).unwrap_or(u64::MAX / 2)
    }

    fn now_tick(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin);
        u64::try_from(since.as_nanos() / self.tick.as_nanos()).unwrap_or(u64::MAX / 2)
    }

    fn tick_instant(&self, tick: u64) -> Instant {
        let nanos = u64::try_from(self.tick.as_nanos())
            .unwrap_or(u64::MAX)
            .saturating_mul(tick);
        self.origin + Duration::from_nanos(nanos)
    }
}

/// The level whose slot distinguishes `when` from `elapsed` (highest differing 6-bit group).
fn level_for(elapsed: u64, when: u64) -> usize {
    let masked = ((elapsed ^ when) | (SLOTS as u64 - 1)).min(MAX_TICKS - 1);
    let significant = 63 - masked.leading_zeros() as usize;
    significant / LEVEL_BITS as usize
}

#[cfg(test)]
#[path = "timer_tests.rs"]
mod tests;
