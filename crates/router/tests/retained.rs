//! The retained index against a reference that scans every stored topic.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{naive_matches, plain_filter_text, topic_text};
use proptest::prelude::*;
use router::{RetainedStore, TopicFilter, TopicName};

fn name(text: &str) -> TopicName {
    text.parse().expect("valid topic name")
}

fn filter(text: &str) -> TopicFilter {
    text.parse().expect("valid filter")
}

fn found(store: &RetainedStore<u32>, filter_text: &str) -> BTreeSet<String> {
    let parsed = filter(filter_text);
    store
        .matching(&parsed)
        .map(|(t, _)| t.to_string())
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn wildcards_and_the_dollar_rule() {
    let mut store = RetainedStore::new();
    let topics = [
        "sport",
        "sport/",
        "sport/tennis",
        "sport/tennis/player1",
        "/finance",
        "$SYS/uptime",
        "$SYS",
        "a/$b",
    ];
    for (n, t) in topics.iter().enumerate() {
        assert_eq!(store.store(&name(t), n as u32, 10), None);
    }
    assert_eq!(store.len(), topics.len());
    assert_eq!(
        found(&store, "sport/#"),
        set(&["sport", "sport/", "sport/tennis", "sport/tennis/player1"])
    );
    assert_eq!(found(&store, "sport/+"), set(&["sport/", "sport/tennis"]));
    assert_eq!(
        found(&store, "+/+"),
        set(&["sport/", "sport/tennis", "/finance", "a/$b"])
    );
    assert_eq!(
        found(&store, "#").len(),
        6,
        "no $ topics for a leading wildcard"
    );
    assert_eq!(found(&store, "+"), set(&["sport"]));
    assert_eq!(found(&store, "$SYS/#"), set(&["$SYS", "$SYS/uptime"]));
    assert_eq!(
        found(&store, "sport/tennis/player1"),
        set(&["sport/tennis/player1"])
    );
    assert!(found(&store, "sport/tennis/player2").is_empty());
}

#[test]
fn replace_clear_count_and_bytes() {
    let mut store = RetainedStore::new();
    assert!(store.is_empty());
    assert_eq!(store.store(&name("a/b"), 1, 100), None);
    assert_eq!(store.total_bytes(), 103);
    assert_eq!(store.store(&name("a/b"), 2, 50), Some(1), "replaced");
    assert_eq!((store.len(), store.total_bytes()), (1, 53));
    assert_eq!(store.store(&name("a/b/c"), 3, 7), None);
    assert_eq!(store.get(&name("a/b")), Some(&2));
    assert_eq!(store.remove(&name("a/b")), Some(2));
    assert_eq!(store.remove(&name("a/b")), None);
    assert_eq!(store.get(&name("a/b")), None);
    assert_eq!((store.len(), store.total_bytes()), (1, 12));
    assert_eq!(found(&store, "a/#"), set(&["a/b/c"]));
    assert_eq!(store.remove(&name("a/b/c")), Some(3));
    assert_eq!((store.len(), store.total_bytes()), (0, 0));
    assert!(found(&store, "#").is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matching_agrees_with_a_full_scan(
        ops in prop::collection::vec((topic_text(), 0..4_u32, 0..20_usize), 1..60),
        queries in prop::collection::vec(plain_filter_text(), 1..20),
    ) {
        let mut store = RetainedStore::new();
        let mut model: BTreeMap<String, (u32, usize)> = BTreeMap::new();
        for (topic, value, size) in ops {
            if value == 0 {
                let expected = model.remove(&topic).map(|(v, _)| v);
                prop_assert_eq!(store.remove(&name(&topic)), expected);
            } else {
                let expected = model.insert(topic.clone(), (value, size)).map(|(v, _)| v);
                prop_assert_eq!(store.store(&name(&topic), value, size), expected);
            }
        }
        prop_assert_eq!(store.len(), model.len());
        let bytes: usize = model.iter().map(|(t, (_, s))| t.len() + s).sum();
        prop_assert_eq!(store.total_bytes(), bytes);
        for query in queries {
            let parsed = filter(&query);
            let got: BTreeMap<String, u32> =
                store.matching(&parsed).map(|(t, v)| (t.to_string(), *v)).collect();
            let expected: BTreeMap<String, u32> = model
                .iter()
                .filter(|(t, _)| naive_matches(&query, t))
                .map(|(t, (v, _))| (t.clone(), *v))
                .collect();
            prop_assert_eq!(got, expected, "filter {:?}", query);
        }
    }
}

#[test]
fn for_each_visits_every_stored_topic_once_dollar_topics_included() {
    let mut store = RetainedStore::new();
    let topics = ["a", "a/b", "a/b/c", "/x", "$SYS/uptime", "z/"];
    for (i, topic) in topics.iter().enumerate() {
        store.store(&name(topic), i as u32, 1);
    }
    store.remove(&name("a/b"));
    let mut seen = BTreeMap::new();
    store.for_each(|topic, value| {
        assert!(
            seen.insert(topic.to_string(), *value).is_none(),
            "visited twice"
        );
    });
    let expected: BTreeMap<String, u32> = [
        ("a", 0),
        ("a/b/c", 2),
        ("/x", 3),
        ("$SYS/uptime", 4),
        ("z/", 5),
    ]
    .into_iter()
    .map(|(t, v)| (t.to_owned(), v))
    .collect();
    assert_eq!(seen, expected);
}
