//! How each shared-subscription strategy spreads 100,000 messages over a group's members.

use std::collections::BTreeMap;

use router::{
    Matches, Publisher, SharedFilter, SharedStrategy, SubscriberId, SubscriptionFilter,
    SubscriptionOptions, SubscriptionTable, TableConfig, TopicName,
};

const MESSAGES: usize = 100_000;
const GROUP: &str = "$share/workers/jobs/+";

fn group_filter() -> SubscriptionFilter {
    GROUP.parse().expect("valid")
}

fn table_with_members(strategy: SharedStrategy, members: &[u64]) -> SubscriptionTable {
    let config = TableConfig {
        shared_strategy: strategy,
        ..TableConfig::default()
    };
    let mut table = SubscriptionTable::new(config);
    for &m in members {
        table.subscribe(
            SubscriberId(m),
            &group_filter(),
            SubscriptionOptions::default(),
            None,
        );
    }
    table
}

fn topic(text: &str) -> TopicName {
    text.parse().expect("valid")
}

/// The member that receives one message on `topic_text` from `client_id`.
fn receiver(
    table: &mut SubscriptionTable,
    out: &mut Matches,
    topic_text: &str,
    client_id: &str,
) -> SubscriberId {
    let publisher = Publisher {
        subscriber: None,
        client_id: client_id.as_bytes(),
    };
    table.match_topic(&topic(topic_text), &publisher, out);
    assert_eq!(out.len(), 1, "one copy per group");
    out.get(0).expect("one delivery").subscriber
}

fn counts(receivers: impl Iterator<Item = SubscriberId>) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for r in receivers {
        *counts.entry(r.0).or_default() += 1;
    }
    counts
}

#[test]
fn round_robin_is_exactly_even_and_cyclic() {
    for members in [&[10_u64, 20, 30, 40][..], &[3, 1, 2]] {
        let mut table = table_with_members(SharedStrategy::RoundRobin, members);
        let mut out = Matches::new();
        let picks: Vec<_> = (0..MESSAGES)
            .map(|_| receiver(&mut table, &mut out, "jobs/a", "p"))
            .collect();
        let counts = counts(picks.iter().copied());
        let (min, max) = (counts.values().min(), counts.values().max());
        assert_eq!(counts.len(), members.len());
        assert!(
            max.zip(min).is_some_and(|(max, min)| max - min <= 1),
            "{counts:?}"
        );
        let mut sorted = members.to_vec();
        sorted.sort_unstable();
        let cycle: Vec<u64> = picks.iter().take(sorted.len()).map(|s| s.0).collect();
        assert_eq!(cycle, sorted, "members in turn by subscriber id");
    }
}

#[test]
fn random_spread_is_within_five_binomial_standard_deviations() {
    let members = [1_u64, 2, 3, 4, 5];
    let mut table = table_with_members(SharedStrategy::Random, &members);
    let mut out = Matches::new();
    let picks: Vec<_> = (0..MESSAGES)
        .map(|_| receiver(&mut table, &mut out, "jobs/a", "p"))
        .collect();
    let counts = counts(picks.iter().copied());
    let p = 1.0 / members.len() as f64;
    let mean = MESSAGES as f64 * p;
    let sigma = (MESSAGES as f64 * p * (1.0 - p)).sqrt();
    assert_eq!(counts.len(), members.len());
    for (member, &count) in &counts {
        let deviation = (count as f64 - mean).abs();
        assert!(
            deviation <= 5.0 * sigma,
            "member {member}: {count} vs {mean} ± {sigma}"
        );
    }
    // Not round-robin in disguise: consecutive repeats happen about p of the time.
    let repeats = picks.windows(2).filter(|w| w[0] == w[1]).count() as f64;
    let expected_repeats = (MESSAGES - 1) as f64 * p;
    assert!(
        (repeats - expected_repeats).abs() <= 5.0 * sigma,
        "{repeats} repeats"
    );

    let reseeded = TableConfig {
        shared_strategy: SharedStrategy::Random,
        random_seed: 42,
    };
    let mut other = SubscriptionTable::new(reseeded);
    for &m in &members {
        other.subscribe(
            SubscriberId(m),
            &group_filter(),
            SubscriptionOptions::default(),
            None,
        );
    }
    let first: Vec<_> = (0..64)
        .map(|_| receiver(&mut other, &mut out, "jobs/a", "p"))
        .collect();
    assert_ne!(first, picks[..64], "the seed drives the sequence");
}

/// Keys spread over members like a fair die, each key stays on one member, and when a member
/// leaves only the keys it held move.
fn check_hash_strategy(strategy: SharedStrategy, key_of: impl Fn(usize) -> (String, String)) {
    let members = [7_u64, 8, 9, 10];
    let keys = 1_000;
    let mut table = table_with_members(strategy, &members);
    let mut out = Matches::new();
    let mut owner: BTreeMap<usize, SubscriberId> = BTreeMap::new();
    for message in 0..MESSAGES {
        let key = message % keys;
        let (topic_text, client) = key_of(key);
        let got = receiver(&mut table, &mut out, &topic_text, &client);
        assert_eq!(*owner.entry(key).or_insert(got), got, "key {key} is stable");
    }
    let p = 1.0 / members.len() as f64;
    let sigma = (keys as f64 * p * (1.0 - p)).sqrt();
    let per_member = counts(owner.values().copied());
    assert_eq!(per_member.len(), members.len());
    for (member, &count) in &per_member {
        let deviation = (count as f64 - keys as f64 * p).abs();
        assert!(
            deviation <= 5.0 * sigma,
            "member {member} owns {count} keys"
        );
    }
    let leaving = SubscriberId(8);
    table.unsubscribe(leaving, &group_filter());
    for (key, before) in &owner {
        let (topic_text, client) = key_of(*key);
        let now = receiver(&mut table, &mut out, &topic_text, &client);
        assert_ne!(now, leaving, "a departed member receives nothing");
        if *before != leaving {
            assert_eq!(
                now, *before,
                "key {key} did not belong to the departed member"
            );
        }
    }
}

#[test]
fn hash_by_publisher_is_stable_per_client() {
    check_hash_strategy(SharedStrategy::HashByPublisher, |key| {
        ("jobs/same".to_owned(), format!("client-{key}"))
    });
}

#[test]
fn hash_by_topic_is_stable_per_topic() {
    check_hash_strategy(SharedStrategy::HashByTopic, |key| {
        (format!("jobs/{key}"), "one-client".to_owned())
    });
}

#[test]
fn sticky_stays_on_one_member_until_it_leaves() {
    let mut table = table_with_members(SharedStrategy::Sticky, &[4, 5, 6]);
    let mut out = Matches::new();
    let first = receiver(&mut table, &mut out, "jobs/a", "p");
    for _ in 0..MESSAGES / 2 {
        assert_eq!(receiver(&mut table, &mut out, "jobs/b", "q"), first);
    }
    table.unsubscribe(first, &group_filter());
    let second = receiver(&mut table, &mut out, "jobs/a", "p");
    assert_ne!(second, first);
    table.subscribe(first, &group_filter(), SubscriptionOptions::default(), None);
    for _ in 0..MESSAGES / 2 {
        assert_eq!(
            receiver(&mut table, &mut out, "jobs/a", "p"),
            second,
            "a returning member does not take the group back"
        );
    }
}

#[test]
fn unavailable_members_are_skipped_unless_nobody_is_available() {
    for strategy in [
        SharedStrategy::RoundRobin,
        SharedStrategy::Random,
        SharedStrategy::HashByPublisher,
        SharedStrategy::HashByTopic,
        SharedStrategy::Sticky,
    ] {
        let mut table = table_with_members(strategy, &[1, 2, 3, 4]);
        let mut out = Matches::new();
        let publisher = Publisher::default();
        let mut seen = BTreeMap::new();
        for n in 0..1_000 {
            let name = topic(&format!("jobs/{n}"));
            table.match_topic_filtered(&name, &publisher, |s| s.0 % 2 == 0, &mut out);
            let got = out.get(0).expect("one delivery").subscriber;
            assert_eq!(got.0 % 2, 0, "{strategy:?} picked offline member {got:?}");
            *seen.entry(got.0).or_insert(0) += 1;
        }
        if strategy == SharedStrategy::RoundRobin {
            assert_eq!(seen, BTreeMap::from([(2, 500), (4, 500)]));
        }
        table.match_topic_filtered(&topic("jobs/x"), &publisher, |_| false, &mut out);
        assert_eq!(out.len(), 1, "{strategy:?}: queued for an offline member");
    }
}

#[test]
fn no_local_members_never_receive_their_own_messages() {
    let mut table = table_with_members(SharedStrategy::Sticky, &[]);
    let no_local = SubscriptionOptions {
        no_local: true,
        ..SubscriptionOptions::default()
    };
    table.subscribe(SubscriberId(1), &group_filter(), no_local, None);
    let mut out = Matches::new();
    let own = Publisher {
        subscriber: Some(SubscriberId(1)),
        client_id: b"one",
    };
    table.match_topic(&topic("jobs/a"), &own, &mut out);
    assert!(out.is_empty(), "the only member is the publisher");
    table.subscribe(
        SubscriberId(2),
        &group_filter(),
        SubscriptionOptions::default(),
        None,
    );
    for _ in 0..100 {
        table.match_topic(&topic("jobs/a"), &own, &mut out);
        assert_eq!(out.get(0).map(|d| d.subscriber), Some(SubscriberId(2)));
    }
}

#[test]
fn group_members_lists_the_group_for_redistribution() {
    let mut table = table_with_members(SharedStrategy::RoundRobin, &[9, 3, 5]);
    let other: SubscriptionFilter = "$share/others/jobs/+".parse().expect("valid");
    table.subscribe(
        SubscriberId(1),
        &other,
        SubscriptionOptions::default(),
        None,
    );
    let group: SharedFilter = GROUP.parse().expect("valid");
    let members: Vec<u64> = table
        .group_members(&group)
        .map(|m| m.subscriber.0)
        .collect();
    assert_eq!(members, [3, 5, 9]);
    table.unsubscribe(SubscriberId(5), &group_filter());
    let members: Vec<u64> = table
        .group_members(&group)
        .map(|m| m.subscriber.0)
        .collect();
    assert_eq!(members, [3, 9]);
    let missing: SharedFilter = "$share/nobody/jobs/+".parse().expect("valid");
    assert_eq!(table.group_members(&missing).count(), 0);
    let stats = table.stats();
    assert_eq!((stats.shared_groups, stats.shared_members), (2, 3));
}
