//! Shared-subscription groups and the strategies that pick one member per message.

use crate::filter::SharedFilter;
use crate::subscription::{SubscribeOutcome, SubscriberId, Subscription};
use crate::trie::NodeValue;

/// How a shared-subscription group picks the member that receives a message.
///
/// Members are kept sorted by [`SubscriberId`], so every replica of a table, having applied the
/// same changes, holds the same member order whatever order the changes arrived in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SharedStrategy {
    /// Each member in turn (by subscriber id): over any run of messages with a fixed membership
    /// the counts differ by at most one.
    #[default]
    RoundRobin,
    /// A uniformly random member, from a seeded deterministic generator (SplitMix64).
    Random,
    /// Rendezvous hashing of the publisher's client id: one publisher always reaches the same
    /// member while that member stays; only its keys move when a member leaves.
    HashByPublisher,
    /// Rendezvous hashing of the topic name, with the same stability as `HashByPublisher`.
    HashByTopic,
    /// The same member until it leaves (or is unavailable), then the next by subscriber id.
    Sticky,
}

/// SplitMix64: a tiny, fast, well-distributed deterministic generator.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }

    /// A uniform value in `0..bound` (multiply-high reduction; `bound` > 0).
    pub(crate) fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next_u64()) * bound as u128) >> 64) as usize
    }
}

/// The SplitMix64 finaliser: a bijective avalanche mix.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stable 64-bit hash of `key` (FNV-1a, then mixed): the same on every shard and build.
pub(crate) fn stable_hash(key: &[u8]) -> u64 {
    let fnv = key.iter().fold(0xCBF2_9CE4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    });
    mix64(fnv)
}

/// Rendezvous weight of `member` for a key hash.
fn rendezvous_weight(key_hash: u64, member: SubscriberId) -> u64 {
    mix64(key_hash ^ member.0.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// What a pick may depend on besides the group itself.
pub(crate) struct PickInput<'a> {
    pub(crate) strategy: SharedStrategy,
    pub(crate) publisher: Option<SubscriberId>,
    pub(crate) publisher_client_id: &'a [u8],
    pub(crate) topic: &'a [u8],
}

/// One group: its filter, its members sorted by subscriber, and the strategy cursor.
#[derive(Debug, Clone)]
pub(crate) struct ShareGroup {
    pub(crate) filter: SharedFilter,
    pub(crate) members: Vec<Subscription>,
    /// Last member picked (round-robin cursor and sticky choice).
    last: Option<SubscriberId>,
}

impl ShareGroup {
    /// Picks the member for one message: first among eligible members that `available` accepts,
    /// else among all eligible members (so that the message can be queued for an offline member
    /// of a persistent session). A member is eligible unless it is the publisher and its
    /// subscription has no-local set.
    pub(crate) fn pick<F: FnMut(SubscriberId) -> bool>(
        &mut self,
        input: &PickInput<'_>,
        rng: &mut SplitMix64,
        available: &mut F,
    ) -> Option<Subscription> {
        let eligible =
            |m: &Subscription| !(m.options.no_local && Some(m.subscriber) == input.publisher);
        let chosen = self
            .choose(input, rng, |m| eligible(m) && available(m.subscriber))
            .or_else(|| self.choose(input, rng, eligible))?;
        let member = self.members[chosen];
        self.last = Some(member.subscriber);
        Some(member)
    }

    fn choose(
        &self,
        input: &PickInput<'_>,
        rng: &mut SplitMix64,
        mut ok: impl FnMut(&Subscription) -> bool,
    ) -> Option<usize> {
        let n = self.members.len();
        if n == 0 {
            return None;
        }
        let after_last = |last: Option<SubscriberId>| {
            last.map_or(0, |l| self.members.partition_point(|m| m.subscriber <= l)) % n
        };
        let scan_from = |start: usize, ok: &mut dyn FnMut(&Subscription) -> bool| {
            (0..n)
                .map(|k| (start + k) % n)
                .find(|&i| ok(&self.members[i]))
        };
        match input.strategy {
            SharedStrategy::RoundRobin => scan_from(after_last(self.last), &mut ok),
            SharedStrategy::Sticky => {
                let current = self.last.and_then(|l| self.position(l));
                match current {
                    Some(i) if ok(&self.members[i]) => Some(i),
                    _ => scan_from(after_last(self.last), &mut ok),
                }
            }
            SharedStrategy::Random => scan_from(rng.below(n), &mut ok),
            SharedStrategy::HashByPublisher => self.rendezvous(input.publisher_client_id, ok),
            SharedStrategy::HashByTopic => self.rendezvous(input.topic, ok),
        }
    }

    fn rendezvous(&self, key: &[u8], mut ok: impl FnMut(&Subscription) -> bool) -> Option<usize> {
        let key_hash = stable_hash(key);
        (0..self.members.len())
            .filter(|&i| ok(&self.members[i]))
            .max_by_key(|&i| rendezvous_weight(key_hash, self.members[i].subscriber))
    }

    fn position(&self, subscriber: SubscriberId) -> Option<usize> {
        self.members
            .binary_search_by_key(&subscriber, |m| m.subscriber)
            .ok()
    }
}

/// The groups subscribed under one topic filter (one per share name).
#[derive(Debug, Clone, Default)]
pub(crate) struct ShareGroups(pub(crate) Vec<ShareGroup>);

impl NodeValue for ShareGroups {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl ShareGroups {
    /// Where the group of `filter`'s share name is (`Ok`) or would go (`Err`): groups are kept
    /// sorted by share name so that match output order does not depend on history.
    fn locate(&self, filter: &SharedFilter) -> Result<usize, usize> {
        self.0
            .binary_search_by(|g| g.filter.share_name().cmp(filter.share_name()))
    }

    /// The group of `filter`'s share name, if it exists.
    pub(crate) fn group(&self, filter: &SharedFilter) -> Option<&ShareGroup> {
        self.locate(filter).ok().map(|i| &self.0[i])
    }

    /// Adds or replaces `member` in the group of `filter`, creating the group when needed.
    pub(crate) fn join(&mut self, filter: &SharedFilter, member: Subscription) -> SubscribeOutcome {
        let index = self.locate(filter).unwrap_or_else(|i| {
            let group = ShareGroup {
                filter: filter.detached(),
                members: Vec::new(),
                last: None,
            };
            self.0.insert(i, group);
            i
        });
        let members = &mut self.0[index].members;
        match members.binary_search_by_key(&member.subscriber, |m| m.subscriber) {
            Ok(i) => SubscribeOutcome::Replaced {
                previous: std::mem::replace(&mut members[i], member),
            },
            Err(i) => {
                members.insert(i, member);
                SubscribeOutcome::New
            }
        }
    }

    /// Removes `subscriber` from the group of `filter`; drops the group when it empties.
    /// Returns the removed membership and whether the group was dropped.
    pub(crate) fn leave(
        &mut self,
        filter: &SharedFilter,
        subscriber: SubscriberId,
    ) -> Option<(Subscription, bool)> {
        let index = self.locate(filter).ok()?;
        let group = &mut self.0[index];
        let position = group.position(subscriber)?;
        let removed = group.members.remove(position);
        let dropped = group.members.is_empty();
        if dropped {
            self.0.remove(index);
        }
        Some((removed, dropped))
    }
}
