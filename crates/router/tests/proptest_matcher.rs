//! The subscription table against a naive reference: random subscribe, unsubscribe and match
//! sequences over a small alphabet (so that filters overlap), with `$` topics, empty levels,
//! no-local, shared groups, availability and every shared strategy.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{naive_matches, plain_filter_text, topic_text};
use proptest::prelude::*;
use router::{
    Matches, Publisher, QoS, RetainHandling, SharedStrategy, SubscribeOutcome, SubscriberId,
    Subscription, SubscriptionFilter, SubscriptionId, SubscriptionOptions, SubscriptionTable,
    TableConfig, TopicName,
};

const SUBSCRIBERS: u64 = 6;

#[derive(Debug, Clone)]
enum Op {
    Subscribe {
        who: u64,
        filter: String,
        options: SubscriptionOptions,
        id: Option<u32>,
    },
    Unsubscribe {
        who: u64,
        filter: String,
    },
    Match {
        topic: String,
        publisher: Option<u64>,
        offline: u8,
    },
}

fn filter() -> impl Strategy<Value = String> {
    let share = prop::option::weighted(0.3, prop::sample::select(vec!["g1", "g2"]));
    (share, plain_filter_text()).prop_map(|(share, plain)| match share {
        Some(group) => format!("$share/{group}/{plain}"),
        None => plain,
    })
}

fn options() -> impl Strategy<Value = SubscriptionOptions> {
    (0..3_u8, any::<bool>(), any::<bool>()).prop_map(|(qos, no_local, rap)| SubscriptionOptions {
        qos: QoS::from_u8(qos).expect("0..3"),
        no_local,
        retain_as_published: rap,
        retain_handling: RetainHandling::SendAtSubscribe,
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..SUBSCRIBERS, filter(), options(), prop::option::of(1..4_u32))
            .prop_map(|(who, filter, options, id)| Op::Subscribe { who, filter, options, id }),
        1 => (0..SUBSCRIBERS, filter()).prop_map(|(who, filter)| Op::Unsubscribe { who, filter }),
        3 => (topic_text(), prop::option::of(0..SUBSCRIBERS), any::<u8>())
            .prop_map(|(topic, publisher, offline)| Op::Match { topic, publisher, offline }),
    ]
}

fn strategy() -> impl Strategy<Value = SharedStrategy> {
    prop::sample::select(vec![
        SharedStrategy::RoundRobin,
        SharedStrategy::Random,
        SharedStrategy::HashByPublisher,
        SharedStrategy::HashByTopic,
        SharedStrategy::Sticky,
    ])
}

/// (share name, topic filter) of a shared filter text, `None` for a plain one.
fn split_shared(text: &str) -> Option<(&str, &str)> {
    text.strip_prefix("$share/")?.split_once('/')
}

type Model = BTreeMap<(String, u64), Subscription>;

/// Expected non-shared deliveries: subscriber -> (max QoS, OR of retain-as-published, ids).
fn expected_plain(
    model: &Model,
    topic: &str,
    publisher: Option<u64>,
) -> Vec<(u64, QoS, bool, Vec<u32>)> {
    let mut merged: BTreeMap<u64, (QoS, bool, BTreeSet<u32>)> = BTreeMap::new();
    for ((filter, who), sub) in model {
        if split_shared(filter).is_some() || !naive_matches(filter, topic) {
            continue;
        }
        if sub.options.no_local && publisher == Some(*who) {
            continue;
        }
        let entry = merged
            .entry(*who)
            .or_insert((QoS::AtMostOnce, false, BTreeSet::new()));
        entry.0 = entry.0.max(sub.options.qos);
        entry.1 |= sub.options.retain_as_published;
        entry.2.extend(sub.id.map(SubscriptionId::get));
    }
    merged
        .into_iter()
        .map(|(w, (q, r, ids))| (w, q, r, ids.into_iter().collect()))
        .collect()
}

fn check_match(
    table: &mut SubscriptionTable,
    model: &Model,
    topic_text: &str,
    publisher: Option<u64>,
    offline: u8,
) {
    let name: TopicName = topic_text.parse().expect("generated topics are valid");
    let mut out = Matches::new();
    let who = Publisher {
        subscriber: publisher.map(SubscriberId),
        client_id: b"publisher",
    };
    let available = |s: SubscriberId| offline & (1 << s.0) == 0;
    table.match_topic_filtered(&name, &who, available, &mut out);

    let mut plain: Vec<_> = out
        .iter()
        .filter(|d| d.shared.is_none())
        .map(|d| {
            let ids = d.subscription_ids.iter().map(|i| i.get()).collect();
            (d.subscriber.0, d.qos, d.retain_as_published, ids)
        })
        .collect();
    plain.sort();
    assert_eq!(
        plain,
        expected_plain(model, topic_text, publisher),
        "plain deliveries for {topic_text:?}"
    );

    let mut groups: BTreeMap<(String, String), Vec<(u64, Subscription)>> = BTreeMap::new();
    for ((filter, who), sub) in model {
        if let Some((share, inner)) = split_shared(filter)
            && naive_matches(inner, topic_text)
            && !(sub.options.no_local && publisher == Some(*who))
        {
            groups
                .entry((share.into(), inner.into()))
                .or_default()
                .push((*who, *sub));
        }
    }
    let shared: Vec<_> = out.iter().filter(|d| d.shared.is_some()).collect();
    let delivered: BTreeSet<(String, String)> = shared
        .iter()
        .filter_map(|d| d.shared)
        .map(|s| (s.share_name().to_owned(), s.filter().to_string()))
        .collect();
    assert_eq!(shared.len(), delivered.len(), "at most one copy per group");
    assert_eq!(
        delivered,
        groups.keys().cloned().collect(),
        "one copy per matching group"
    );
    for delivery in shared {
        let group = delivery.shared.expect("filtered on shared");
        let members = &groups[&(group.share_name().to_owned(), group.filter().to_string())];
        let (_, sub) = members
            .iter()
            .find(|(w, _)| *w == delivery.subscriber.0)
            .expect("the picked subscriber is an eligible member");
        assert_eq!(delivery.qos, sub.options.qos);
        assert_eq!(delivery.subscription_ids, sub.id.as_slice());
        let any_online = members.iter().any(|(w, _)| available(SubscriberId(*w)));
        assert!(
            !any_online || available(delivery.subscriber),
            "prefers an available member"
        );
    }
}

fn run(ops: Vec<Op>, strategy: SharedStrategy) {
    let config = TableConfig {
        shared_strategy: strategy,
        ..TableConfig::default()
    };
    let mut table = SubscriptionTable::new(config);
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::Subscribe {
                who,
                filter,
                options,
                id,
            } => {
                let parsed: SubscriptionFilter =
                    filter.parse().expect("generated filters are valid");
                let subscription = Subscription {
                    subscriber: SubscriberId(who),
                    options,
                    id: id.and_then(SubscriptionId::new),
                };
                let outcome =
                    table.subscribe(subscription.subscriber, &parsed, options, subscription.id);
                let expected = match model.insert((filter, who), subscription) {
                    Some(previous) => SubscribeOutcome::Replaced { previous },
                    None => SubscribeOutcome::New,
                };
                assert_eq!(outcome, expected);
            }
            Op::Unsubscribe { who, filter } => {
                let parsed: SubscriptionFilter =
                    filter.parse().expect("generated filters are valid");
                let removed = table.unsubscribe(SubscriberId(who), &parsed);
                assert_eq!(removed, model.remove(&(filter, who)));
            }
            Op::Match {
                topic,
                publisher,
                offline,
            } => {
                check_match(&mut table, &model, &topic, publisher, offline);
            }
        }
    }
    let dump: Vec<_> = model.iter().map(|((f, _), s)| (f.clone(), *s)).collect();
    assert_eq!(table.entries(), dump);
    let stats = table.stats();
    assert_eq!(stats.subscriptions + stats.shared_members, model.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn table_agrees_with_the_naive_matcher(
        ops in prop::collection::vec(op(), 1..80),
        strategy in strategy(),
    ) {
        run(ops, strategy);
    }

    #[test]
    fn single_filter_matches_agrees_with_the_naive_matcher(filter in filter(), topic in topic_text()) {
        if let Ok(SubscriptionFilter::Plain(parsed)) = filter.parse::<SubscriptionFilter>() {
            let name: TopicName = topic.parse().expect("generated topics are valid");
            prop_assert_eq!(parsed.matches(&name), naive_matches(&filter, &topic));
        }
    }
}

#[test]
fn unsubscribing_everything_prunes_the_trie() {
    let mut table = SubscriptionTable::default();
    let filters = ["a/+/b", "a/#", "+/+", "#", "a//+", "$share/g/a/+", "x"];
    for (n, text) in filters.iter().enumerate() {
        let parsed: SubscriptionFilter = text.parse().expect("valid");
        table.subscribe(
            SubscriberId(n as u64),
            &parsed,
            SubscriptionOptions::default(),
            None,
        );
    }
    for (n, text) in filters.iter().enumerate() {
        let parsed: SubscriptionFilter = text.parse().expect("valid");
        assert!(table.unsubscribe(SubscriberId(n as u64), &parsed).is_some());
    }
    let stats = table.stats();
    assert_eq!(stats.wildcard_trie_nodes, 1, "only the root is left");
    assert_eq!(
        (
            stats.exact_filters,
            stats.shared_groups,
            stats.subscriptions
        ),
        (0, 0, 0)
    );
    assert!(table.entries().is_empty());
}
