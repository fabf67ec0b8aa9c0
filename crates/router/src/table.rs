//! The subscription table: subscribe, unsubscribe and match, for plain and shared filters.

use codec::{SubscriptionId, SubscriptionOptions};

use crate::filter::{SharedFilter, SubscriptionFilter};
use crate::index::FilterIndex;
use crate::matches::Matches;
use crate::shared::{PickInput, ShareGroups, SharedStrategy, SplitMix64};
use crate::subscription::{SubscribeOutcome, SubscriberId, SubscriberSet, Subscription};
use crate::topic::TopicName;

/// Settings of a [`SubscriptionTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableConfig {
    /// How shared-subscription groups pick a member. Default [`SharedStrategy::RoundRobin`].
    pub shared_strategy: SharedStrategy,
    /// Seed of the generator behind [`SharedStrategy::Random`]. Default `0x853C_49E6_748F_EA9B`
    /// (any value works; give each shard its own to decorrelate them).
    pub random_seed: u64,
}

impl Default for TableConfig {
    fn default() -> Self {
        Self {
            shared_strategy: SharedStrategy::RoundRobin,
            random_seed: 0x853C_49E6_748F_EA9B,
        }
    }
}

/// Who published the message being matched.
#[derive(Debug, Clone, Copy, Default)]
pub struct Publisher<'a> {
    /// The publishing session, if it subscribes through this table (for no-local); `None` for
    /// messages that no subscriber published (e.g. broker-generated ones).
    pub subscriber: Option<SubscriberId>,
    /// The publisher's client identifier, as bytes (the key of
    /// [`SharedStrategy::HashByPublisher`]).
    pub client_id: &'a [u8],
}

/// Sizes of a table, for limits and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableStats {
    /// Non-shared subscriptions.
    pub subscriptions: usize,
    /// Distinct non-shared filters without wildcards.
    pub exact_filters: usize,
    /// Live nodes of the non-shared wildcard trie (the root included).
    pub wildcard_trie_nodes: usize,
    /// Shared-subscription groups (distinct share name and filter).
    pub shared_groups: usize,
    /// Memberships over all shared groups.
    pub shared_members: usize,
}

/// The subscriptions of every session, matched against published topics.
///
/// Filters without wildcards take a hash fast path; wildcard filters live in a level trie. A
/// match writes into a caller-provided [`Matches`] and allocates nothing once that buffer has
/// grown. Matching takes `&mut self` only for the shared-group cursors and generator: a table is
/// owned by one shard (see [`Replica`](crate::Replica)).
#[derive(Debug, Clone)]
pub struct SubscriptionTable {
    config: TableConfig,
    direct: FilterIndex<SubscriberSet>,
    shared: FilterIndex<ShareGroups>,
    rng: SplitMix64,
    subscriptions: usize,
    shared_groups: usize,
    shared_members: usize,
}

impl Default for SubscriptionTable {
    fn default() -> Self {
        Self::new(TableConfig::default())
    }
}

impl SubscriptionTable {
    /// An empty table.
    pub fn new(config: TableConfig) -> Self {
        Self {
            config,
            direct: FilterIndex::default(),
            shared: FilterIndex::default(),
            rng: SplitMix64::new(config.random_seed),
            subscriptions: 0,
            shared_groups: 0,
            shared_members: 0,
        }
    }

    /// The settings the table was built with.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// Adds `subscriber`'s subscription to `filter`, or replaces its existing one (MQTT 3.8.4).
    /// The filter's bytes are copied: the table never keeps a receive buffer alive.
    pub fn subscribe(
        &mut self,
        subscriber: SubscriberId,
        filter: &SubscriptionFilter,
        options: SubscriptionOptions,
        id: Option<SubscriptionId>,
    ) -> SubscribeOutcome {
        let subscription = Subscription {
            subscriber,
            options,
            id,
        };
        match filter {
            SubscriptionFilter::Plain(plain) => {
                let outcome = self.direct.entry(plain).insert(subscription);
                self.subscriptions += usize::from(outcome.is_new());
                outcome
            }
            SubscriptionFilter::Shared(shared) => {
                let groups = self.shared.entry(&shared.filter());
                let before = groups.0.len();
                let outcome = groups.join(shared, subscription);
                self.shared_groups += groups.0.len() - before;
                self.shared_members += usize::from(outcome.is_new());
                outcome
            }
        }
    }

    /// Removes `subscriber`'s subscription to `filter`, returning it (`None` if there was none).
    pub fn unsubscribe(
        &mut self,
        subscriber: SubscriberId,
        filter: &SubscriptionFilter,
    ) -> Option<Subscription> {
        match filter {
            SubscriptionFilter::Plain(plain) => {
                let removed = self.direct.get_mut(plain)?.remove(subscriber)?;
                self.subscriptions -= 1;
                self.direct.remove_if_empty(plain);
                Some(removed)
            }
            SubscriptionFilter::Shared(shared) => {
                let topic_filter = shared.filter();
                let (removed, dropped) = self
                    .shared
                    .get_mut(&topic_filter)?
                    .leave(shared, subscriber)?;
                self.shared_members -= 1;
                if dropped {
                    self.shared_groups -= 1;
                    self.shared.remove_if_empty(&topic_filter);
                }
                Some(removed)
            }
        }
    }

    /// `subscriber`'s subscription to `filter`, if any.
    pub fn subscription(
        &self,
        subscriber: SubscriberId,
        filter: &SubscriptionFilter,
    ) -> Option<&Subscription> {
        match filter {
            SubscriptionFilter::Plain(plain) => self.direct.get(plain)?.get(subscriber),
            SubscriptionFilter::Shared(shared) => self
                .group_members(shared)
                .find(|m| m.subscriber == subscriber),
        }
    }

    /// The members of the shared group `filter` (share name and filter), by subscriber id.
    pub fn group_members(&self, filter: &SharedFilter) -> impl Iterator<Item = &Subscription> {
        self.shared
            .get(&filter.filter())
            .and_then(|groups| groups.group(filter))
            .into_iter()
            .flat_map(|group| group.members.iter())
    }

    /// Whether a message on `topic` from `publisher` reaches `subscriber` through one of its
    /// non-shared subscriptions (no-local ones skip the publisher's own messages).
    pub fn reaches(
        &mut self,
        topic: &TopicName,
        subscriber: SubscriberId,
        publisher: Option<SubscriberId>,
    ) -> bool {
        let mut stack = crate::index::WalkStack::new();
        let mut reached = false;
        self.direct.for_each_match(topic, &mut stack, |set| {
            reached |= set.as_slice().iter().any(|s| {
                s.subscriber == subscriber && !(s.options.no_local && publisher == Some(subscriber))
            });
        });
        reached
    }

    /// Matches `topic`: see [`Self::match_topic_filtered`], with every member available.
    pub fn match_topic(&mut self, topic: &TopicName, publisher: &Publisher<'_>, out: &mut Matches) {
        self.match_topic_filtered(topic, publisher, |_| true, out);
    }

    /// Matches `topic` into `out` (cleared first): one delivery per subscriber with the highest
    /// QoS, OR-ed retain-as-published and all identifiers of its matching subscriptions, skipping
    /// no-local subscriptions of the publisher; then one delivery per matching shared group, to
    /// a member picked by the table's strategy among those `available` accepts (falling back to
    /// any eligible member when none is available, so a message can be queued for an offline
    /// persistent session).
    pub fn match_topic_filtered<F: FnMut(SubscriberId) -> bool>(
        &mut self,
        topic: &TopicName,
        publisher: &Publisher<'_>,
        mut available: F,
        out: &mut Matches,
    ) {
        out.clear();
        let mut stack = std::mem::take(&mut out.stack);
        let excluded = publisher.subscriber;
        let mut sources = 0_usize;
        let hits = &mut out.hits;
        self.direct.for_each_match(topic, &mut stack, |set| {
            sources += 1;
            let kept = set
                .as_slice()
                .iter()
                .filter(|s| !(s.options.no_local && Some(s.subscriber) == excluded));
            hits.extend(kept);
        });
        out.merge_hits(sources > 1);
        if self.shared_groups > 0 {
            let input = PickInput {
                strategy: self.config.shared_strategy,
                publisher: excluded,
                publisher_client_id: publisher.client_id,
                topic: topic.as_bytes(),
            };
            let rng = &mut self.rng;
            self.shared.for_each_match(topic, &mut stack, |groups| {
                for group in &mut groups.0 {
                    if let Some(member) = group.pick(&input, rng, &mut available) {
                        out.push_shared(&member, &group.filter);
                    }
                }
            });
        }
        out.stack = stack;
    }

    /// Sizes of the table.
    pub fn stats(&self) -> TableStats {
        TableStats {
            subscriptions: self.subscriptions,
            exact_filters: self.direct.exact_len(),
            wildcard_trie_nodes: self.direct.trie_nodes(),
            shared_groups: self.shared_groups,
            shared_members: self.shared_members,
        }
    }

    /// Every subscription with its filter text (`$share/...` for shared ones), sorted by filter
    /// then subscriber: a canonical dump for snapshots, comparisons and debugging (allocates).
    pub fn entries(&self) -> Vec<(String, Subscription)> {
        let mut entries = Vec::with_capacity(self.subscriptions + self.shared_members);
        self.direct.for_each_filter(|filter, set| {
            entries.extend(set.as_slice().iter().map(|s| (filter.to_owned(), *s)));
        });
        self.shared.for_each_filter(|_, groups| {
            for group in &groups.0 {
                let text = group.filter.as_str();
                entries.extend(group.members.iter().map(|m| (text.to_owned(), *m)));
            }
        });
        entries.sort_unstable_by(|a, b| (&a.0, a.1.subscriber).cmp(&(&b.0, b.1.subscriber)));
        entries
    }
}
