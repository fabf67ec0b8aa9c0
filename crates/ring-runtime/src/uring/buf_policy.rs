//! Which provided buffers the ring offers the kernel: only as many as the traffic needs, the
//! most recently used first, so that the pages an idle or lightly loaded shard touches stay
//! few (the kernel takes ring entries in order: a ring holding every buffer would have each
//! of them written once within its first receives).
//!
//! The ring offers `target` buffers (from [`MIN_OFFERED`]); a receive that finds none
//! (`ENOBUFS`) doubles it, at most once per wait, up to every buffer. Buffers given back go on
//! a stack and the ring is refilled from its top (warm pages first). Once per
//! [`SHRINK_INTERVAL`], if the ring never had fewer than half its offered buffers left (the
//! traffic needed under half), the target halves (falls to [`MIN_OFFERED`] when no receive
//! took a buffer at all), and spare buffers beyond the target that were written are handed
//! back to the OS (their pages read as zeros when next used). A ring that shrank holds more
//! than its target (a buffer in the ring cannot be taken back): the ones beyond the target
//! from its head, which the kernel reaches last, are trimmed too (see `BufRing::adjust` for
//! when that is safe).

use std::time::{Duration, Instant};

/// The fewest buffers the ring offers.
pub(super) const MIN_OFFERED: u16 = 32;
/// How often the offer may shrink.
pub(super) const SHRINK_INTERVAL: Duration = Duration::from_secs(1);

/// The offer's bookkeeping (no memory of its own beyond a stack and a flag per buffer).
#[derive(Debug)]
pub(super) struct BufPolicy {
    /// Buffers neither in the ring nor held by a completion being handled; the last was
    /// given back last.
    spare: Vec<u16>,
    /// Per buffer: written by a receive since its pages were last handed back (it may hold
    /// pages).
    warm: Vec<bool>,
    /// How many of `warm` are set.
    warm_count: u16,
    /// Buffers in the ring, not yet taken by a receive.
    offered: u16,
    /// How many the ring should offer.
    target: u16,
    /// The fewest offered since the last shrink check.
    low_water: u16,
    /// The ring ran dry since the last wait.
    starved: bool,
    /// When the offer was last checked for shrinking.
    checked: Instant,
    /// Receives that took a buffer since the last shrink check.
    taken: u32,
    /// The ring holds more than its target since a shrink, and the buffers beyond the
    /// target have not been trimmed yet.
    trim_pending: bool,
}

/// What one [`BufPolicy::adjust`] asks of the ring.
#[derive(Debug, Default)]
pub(super) struct Adjusted {
    /// Spare buffers whose pages can go back to the OS (no longer warm).
    pub(super) cold: Vec<u16>,
    /// The offered buffers beyond the target from the ring's head should be trimmed.
    pub(super) trim: bool,
}

impl BufPolicy {
    /// A policy for `count` buffers (ids `0..count`), none offered yet.
    pub(super) fn new(count: u16, now: Instant) -> Self {
        let target = MIN_OFFERED.min(count);
        Self {
            spare: (0..count).rev().collect(),
            warm: vec![false; usize::from(count)],
            warm_count: 0,
            offered: 0,
            target,
            low_water: target,
            starved: false,
            checked: now,
            taken: 0,
            trim_pending: false,
        }
    }

    /// How many buffers the ring should offer.
    pub(super) fn target(&self) -> u16 {
        self.target
    }

    /// How many buffers are in the ring, not yet taken by a receive.
    pub(super) fn offered(&self) -> u16 {
        self.offered
    }

    /// The next buffer to offer, while the ring offers fewer than its target.
    pub(super) fn next_to_offer(&mut self) -> Option<u16> {
        if self.offered >= self.target {
            return None;
        }
        let bid = self.spare.pop()?;
        self.offered += 1;
        Some(bid)
    }

    /// A receive took `bid` from the ring and it has been copied out: it is spare again.
    pub(super) fn given_back(&mut self, bid: u16) {
        if !std::mem::replace(&mut self.warm[usize::from(bid)], true) {
            self.warm_count += 1;
        }
        self.taken = self.taken.saturating_add(1);
        self.offered = self.offered.saturating_sub(1);
        self.low_water = self.low_water.min(self.offered);
        self.spare.push(bid);
    }

    /// A receive found the ring empty.
    pub(super) fn ran_dry(&mut self) {
        self.starved = true;
    }

    /// Once per wait: doubles the target after a dry ring; at most every [`SHRINK_INTERVAL`],
    /// halves it when under half was used (down to [`MIN_OFFERED`] when nothing was), and says
    /// which spare buffers are now cold and whether the ring should be trimmed.
    pub(super) fn adjust(&mut self, now: Instant) -> Adjusted {
        let count = u16::try_from(self.warm.len()).unwrap_or(u16::MAX);
        if std::mem::take(&mut self.starved) {
            self.target = self.target.saturating_mul(2).min(count);
            self.low_water = 0;
            self.taken = 0;
            self.checked = now;
            self.trim_pending = false;
            return Adjusted::default();
        }
        if now.duration_since(self.checked) < SHRINK_INTERVAL {
            return Adjusted::default();
        }
        self.checked = now;
        let taken = std::mem::take(&mut self.taken);
        let needed_under_half = self.low_water > self.target / 2;
        self.low_water = self.offered;
        let shrinks = needed_under_half && self.target > MIN_OFFERED;
        let mut cold = Vec::new();
        if shrinks {
            self.target = if taken == 0 {
                MIN_OFFERED
            } else {
                (self.target / 2).max(MIN_OFFERED)
            };
            cold = self.cold_spares();
        }
        // Buffers beyond the target are never offered again once taken, so only a shrink
        // leaves new ones to trim.
        self.trim_pending = self.offered > self.target && (self.trim_pending || shrinks);
        Adjusted {
            cold,
            trim: self.trim_pending,
        }
    }

    /// Whether the offer may still shrink or be trimmed: the shard should wake up for the
    /// next check even when nothing else is due.
    pub(super) fn wants_check(&self) -> bool {
        self.target > MIN_OFFERED || self.trim_pending
    }

    /// The ring was trimmed: every buffer beyond the target was [`Self::cool`]ed.
    pub(super) fn trimmed(&mut self) {
        self.trim_pending = false;
    }

    /// Marks `bid` cold; true when it was warm (its pages should go back to the OS).
    pub(super) fn cool(&mut self, bid: u16) -> bool {
        let was_warm = self
            .warm
            .get_mut(usize::from(bid))
            .is_some_and(std::mem::take);
        if was_warm {
            self.warm_count -= 1;
        }
        was_warm
    }

    /// Buffers that may hold pages now (written since their pages were last handed back).
    pub(super) fn warm_count(&self) -> u16 {
        self.warm_count
    }

    /// Every warm spare buffer, now cold (for a shard gone quiet: none is kept warm for the
    /// next receives, which fault in zeroed pages instead).
    pub(super) fn cool_every_spare(&mut self) -> Vec<u16> {
        self.cool_spares_below(self.spare.len())
    }

    /// The warm spare buffers beyond the `target` most recently given back, now cold.
    fn cold_spares(&mut self) -> Vec<u16> {
        let keep = usize::from(self.target);
        self.cool_spares_below(self.spare.len().saturating_sub(keep))
    }

    /// The warm buffers among the first `end` of the spare stack (those given back longest
    /// ago), now cold.
    fn cool_spares_below(&mut self, end: usize) -> Vec<u16> {
        let mut cooled = Vec::new();
        for index in 0..end {
            let bid = self.spare[index];
            if self.cool(bid) {
                cooled.push(bid);
            }
        }
        cooled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer_all(policy: &mut BufPolicy) -> Vec<u16> {
        std::iter::from_fn(|| policy.next_to_offer()).collect()
    }

    #[test]
    fn a_quiet_ring_reuses_the_same_few_buffers() {
        let now = Instant::now();
        let mut policy = BufPolicy::new(512, now);
        let mut ring: std::collections::VecDeque<u16> = offer_all(&mut policy).into();
        assert_eq!(ring.len(), usize::from(MIN_OFFERED));
        let mut used = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let bid = ring.pop_front().unwrap();
            used.insert(bid);
            policy.given_back(bid);
            ring.extend(offer_all(&mut policy));
        }
        assert_eq!(used.len(), usize::from(MIN_OFFERED));
    }

    #[test]
    fn a_dry_ring_doubles_its_offer_once_per_wait() {
        let now = Instant::now();
        let mut policy = BufPolicy::new(512, now);
        offer_all(&mut policy);
        policy.ran_dry();
        policy.ran_dry();
        assert!(policy.adjust(now).cold.is_empty());
        assert_eq!(offer_all(&mut policy).len(), usize::from(MIN_OFFERED));
        assert_eq!(policy.target, 2 * MIN_OFFERED);
        for _ in 0..10 {
            policy.ran_dry();
            policy.adjust(now);
        }
        assert_eq!(policy.target, 512);
    }

    #[test]
    fn an_offer_used_under_half_shrinks_and_hands_cold_pages_back() {
        let start = Instant::now();
        let mut policy = BufPolicy::new(512, start);
        policy.target = 256;
        policy.low_water = u16::MAX;
        let mut ring: std::collections::VecDeque<u16> = offer_all(&mut policy).into();
        assert_eq!(ring.len(), 256);
        // Light traffic: one buffer taken at a time, all 256 written in turn.
        for _ in 0..256 {
            let bid = ring.pop_front().unwrap();
            policy.given_back(bid);
            ring.extend(offer_all(&mut policy));
        }
        assert!(
            policy.adjust(start).cold.is_empty(),
            "shrunk before the interval"
        );
        assert!(policy.adjust(start + SHRINK_INTERVAL).cold.is_empty());
        assert_eq!(policy.target, 128);
        // The ring holds more than the target now: buffers taken are not offered again.
        for _ in 0..200 {
            let bid = ring.pop_front().unwrap();
            policy.given_back(bid);
            ring.extend(offer_all(&mut policy));
        }
        assert_eq!(ring.len(), 128);
        let released = policy.adjust(start + SHRINK_INTERVAL * 2).cold;
        assert_eq!(policy.target, 64);
        // 128 taken while the ring held more than its target stayed spare (the other 72 were
        // offered again): the 64 given back last stay warm, the other 64 are released.
        assert_eq!(released.len(), 64);
        assert!(released.iter().all(|bid| !ring.contains(bid)));
        assert!(released.iter().all(|bid| !policy.warm[usize::from(*bid)]));
        let again = policy.adjust(start + SHRINK_INTERVAL * 3).cold;
        assert!(
            again.iter().all(|bid| !released.contains(bid)),
            "released twice"
        );
    }

    #[test]
    fn a_busy_offer_does_not_shrink() {
        let start = Instant::now();
        let mut policy = BufPolicy::new(512, start);
        let offered = offer_all(&mut policy);
        // Every offered buffer taken before any comes back.
        for bid in offered {
            policy.given_back(bid);
        }
        offer_all(&mut policy);
        policy.target = 64;
        policy.low_water = 0;
        assert!(policy.adjust(start + SHRINK_INTERVAL).cold.is_empty());
        assert_eq!(policy.target, 64);
    }

    /// A ring grown to every buffer by a storm, each buffer written once.
    fn stormed(count: u16, start: Instant) -> (BufPolicy, std::collections::VecDeque<u16>) {
        let mut policy = BufPolicy::new(count, start);
        let mut ring: std::collections::VecDeque<u16> = offer_all(&mut policy).into();
        while policy.target < count {
            policy.ran_dry();
            policy.adjust(start);
            ring.extend(offer_all(&mut policy));
        }
        for _ in 0..count {
            let bid = ring.pop_front().unwrap();
            policy.given_back(bid);
            ring.extend(offer_all(&mut policy));
        }
        assert_eq!(ring.len(), usize::from(count));
        // The storm's own interval needed every buffer: no shrink.
        assert!(!policy.adjust(start + SHRINK_INTERVAL).trim);
        assert_eq!(policy.target(), count);
        (policy, ring)
    }

    /// A quiet shard cools every spare buffer, the ones kept warm for the next receives too;
    /// with the ring's own cooled as well (`BufRing::release_every_buffer`), none is warm,
    /// and the count follows each buffer written again.
    #[test]
    fn every_buffer_goes_cold_when_the_shard_is_quiet_and_the_warm_count_follows() {
        let start = Instant::now();
        let mut policy = BufPolicy::new(256, start);
        let mut ring: std::collections::VecDeque<u16> = offer_all(&mut policy).into();
        // 100 receives into the 32 offered buffers: each written, given back and offered again
        // (a buffer written again counts once).
        for _ in 0..100 {
            let bid = ring.pop_front().unwrap();
            policy.given_back(bid);
            ring.extend(offer_all(&mut policy));
        }
        assert_eq!(policy.warm_count(), MIN_OFFERED);
        // Storm: the offer doubles twice to 128, every buffer offered is written once.
        for _ in 0..2 {
            policy.ran_dry();
            policy.adjust(start);
            ring.extend(offer_all(&mut policy));
        }
        while let Some(bid) = ring.pop_front() {
            policy.given_back(bid);
        }
        assert_eq!(policy.warm_count(), 128);
        // The offer back at its minimum: 32 warm buffers in the ring, 96 warm spares and 128
        // never written.
        policy.target = MIN_OFFERED;
        ring.extend(offer_all(&mut policy));
        let spares = policy.cool_every_spare();
        assert_eq!(spares.len(), 96, "every warm spare, none left warm");
        assert_eq!(policy.warm_count(), MIN_OFFERED);
        assert!(policy.cool_every_spare().is_empty());
        let in_ring = ring.iter().filter(|bid| policy.cool(**bid)).count();
        assert_eq!(in_ring, ring.len());
        assert_eq!(policy.warm_count(), 0);
        let bid = ring.pop_front().unwrap();
        policy.given_back(bid);
        assert_eq!(policy.warm_count(), 1);
    }

    /// Cools the buffers beyond the target from the ring's head, as `BufRing::trim` does;
    /// returns how many were warm.
    fn trim(policy: &mut BufPolicy, ring: &std::collections::VecDeque<u16>) -> usize {
        let beyond = ring.iter().skip(usize::from(policy.target()));
        let warm = beyond.filter(|bid| policy.cool(**bid)).count();
        policy.trimmed();
        warm
    }

    #[test]
    fn an_idle_ring_falls_to_the_minimum_and_trims_what_it_holds_beyond() {
        let start = Instant::now();
        let (mut policy, ring) = stormed(512, start);
        assert!(policy.wants_check());
        let adjusted = policy.adjust(start + SHRINK_INTERVAL * 2);
        assert_eq!(policy.target(), MIN_OFFERED, "no receive took a buffer");
        assert!(adjusted.trim);
        assert_eq!(trim(&mut policy, &ring), 512 - usize::from(MIN_OFFERED));
        assert!(
            !policy.wants_check(),
            "an idle, trimmed ring needs no wake-up"
        );
        let later = policy.adjust(start + SHRINK_INTERVAL * 3);
        assert!(!later.trim && later.cold.is_empty());
    }

    #[test]
    fn a_trim_not_done_is_asked_for_again() {
        let start = Instant::now();
        let (mut policy, _ring) = stormed(256, start);
        assert!(policy.adjust(start + SHRINK_INTERVAL * 2).trim);
        assert!(policy.wants_check());
        assert!(policy.adjust(start + SHRINK_INTERVAL * 3).trim);
    }

    #[test]
    fn a_trimmed_buffer_is_warm_again_once_a_receive_wrote_it() {
        let start = Instant::now();
        let (mut policy, mut ring) = stormed(64, start);
        policy.adjust(start + SHRINK_INTERVAL * 2);
        assert_eq!(trim(&mut policy, &ring), 64 - usize::from(MIN_OFFERED));
        // Light traffic takes every buffer once: none goes back into the over-full ring.
        let taken: Vec<u16> = (0..64).map(|_| ring.pop_front().unwrap()).collect();
        for &bid in &taken {
            policy.given_back(bid);
            ring.extend(offer_all(&mut policy));
        }
        assert_eq!(ring.len(), usize::from(MIN_OFFERED));
        assert!(taken.iter().all(|bid| policy.warm[usize::from(*bid)]));
    }
}
