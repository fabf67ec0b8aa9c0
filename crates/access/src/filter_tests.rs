//! Rule filters against a brute-force reference: matching, overlap and cover over every topic
//! of a small universe (levels `a`, `b`, `c`, `$x` and empty, up to four levels deep, and the
//! empty topic, which MQTT forbids but the relations count: see [`overlaps`] and [`covers`]).

use proptest::prelude::*;

use super::ClientIdentity;
use super::filter::{
    Level, Levels, RuleFilter, Substitution, covers, overlaps, subscription_levels,
};

const TOPIC_LEVELS: [&str; 5] = ["a", "b", "c", "$x", ""];
const FILTER_LEVELS: [&str; 5] = ["a", "b", "$x", "", "+"];

const ANONYMOUS: ClientIdentity<'static> = ClientIdentity {
    client_id: "client",
    username: None,
};

/// The reference: split both, compare level by level.
fn reference_matches(filter: &str, topic: &str) -> bool {
    let filter: Vec<&str> = filter.split('/').collect();
    let topic: Vec<&str> = topic.split('/').collect();
    if topic[0].starts_with('$') && (filter[0] == "+" || filter[0] == "#") {
        return false;
    }
    for (index, level) in filter.iter().enumerate() {
        if *level == "#" {
            return true;
        }
        match topic.get(index) {
            Some(text) if *level == "+" || level == text => {}
            _ => return false,
        }
    }
    filter.len() == topic.len()
}

/// Every topic of the universe.
fn universe() -> Vec<String> {
    let mut topics: Vec<String> = Vec::new();
    let mut previous = vec![String::new()];
    for depth in 1..=4 {
        let mut next = Vec::new();
        for prefix in &previous {
            for level in TOPIC_LEVELS {
                next.push(if depth == 1 {
                    level.to_owned()
                } else {
                    format!("{prefix}/{level}")
                });
            }
        }
        topics.extend(next.iter().cloned());
        previous = next;
    }
    topics
}

/// Valid filters of up to three levels over `FILTER_LEVELS`, `#` allowed last.
fn filter_strategy() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(FILTER_LEVELS.to_vec()), 0..=3),
        any::<bool>(),
    )
        .prop_map(|(mut levels, hash)| {
            if hash || levels.is_empty() {
                levels.truncate(2);
                levels.push("#");
            }
            levels.join("/")
        })
        .prop_filter("the empty filter is invalid", |filter| !filter.is_empty())
}

fn plain(filter: &str) -> RuleFilter {
    RuleFilter::parse(filter, Substitution::Literal).unwrap()
}

proptest! {
    #[test]
    fn matches_agrees_with_the_reference(filter in filter_strategy()) {
        let rule = plain(&filter);
        for topic in universe() {
            prop_assert_eq!(
                rule.matches(&ANONYMOUS, &topic),
                reference_matches(&filter, &topic),
                "filter {} topic {}", filter, topic
            );
        }
    }

    #[test]
    fn overlaps_means_a_common_topic(left in filter_strategy(), right in filter_strategy()) {
        let common = universe()
            .iter()
            .any(|topic| reference_matches(&left, topic) && reference_matches(&right, topic));
        let relation = overlaps(&subscription_levels(&left), &subscription_levels(&right));
        prop_assert_eq!(relation, common, "{} and {}", left, right);
    }

    #[test]
    fn covers_means_every_topic_included(outer in filter_strategy(), inner in filter_strategy()) {
        let included = universe()
            .iter()
            .all(|topic| !reference_matches(&inner, topic) || reference_matches(&outer, topic));
        let relation = covers(&subscription_levels(&outer), &subscription_levels(&inner));
        prop_assert_eq!(relation, included, "{} covers {}", outer, inner);
    }

    #[test]
    fn patterns_match_like_string_substitution(
        pattern in prop::sample::select(vec![
            "%c", "%c/#", "a/%c", "a/%u/+", "x%c/b", "%u%c", "+/%c", "%c/%u", "a%%c",
        ]),
        client_id in prop::sample::select(vec!["a", "b/a", "", "$x", "a/b"]),
        username in prop::sample::select(vec![None, Some("a"), Some("b"), Some("")]),
    ) {
        let rule = RuleFilter::parse(pattern, Substitution::ClientIdAndUsername).unwrap();
        let client = ClientIdentity { client_id, username };
        let substituted = username.map(|name| pattern.replace("%u", name));
        for topic in universe() {
            let expected = match &substituted {
                Some(text) => reference_matches(&text.replace("%c", client_id), &topic),
                None if rule.needs_username() => false,
                None => reference_matches(&pattern.replace("%c", client_id), &topic),
            };
            prop_assert_eq!(rule.matches(&client, &topic), expected, "{} {}", pattern, topic);
        }
    }
}

#[test]
fn wildcard_first_levels_do_not_match_dollar_topics() {
    assert!(!plain("#").matches(&ANONYMOUS, "$SYS/broker/uptime"));
    assert!(!plain("+/broker/#").matches(&ANONYMOUS, "$SYS/broker/uptime"));
    assert!(plain("$SYS/#").matches(&ANONYMOUS, "$SYS/broker/uptime"));
    assert!(plain("$SYS/+/uptime").matches(&ANONYMOUS, "$SYS/broker/uptime"));
    assert!(plain("a/#").matches(&ANONYMOUS, "a/$x"));
}

#[test]
fn parent_level_and_empty_levels() {
    assert!(plain("a/#").matches(&ANONYMOUS, "a"));
    assert!(!plain("a/+").matches(&ANONYMOUS, "a"));
    assert!(plain("a/+").matches(&ANONYMOUS, "a/"));
    assert!(plain("+/+").matches(&ANONYMOUS, "/"));
    assert!(!plain("a").matches(&ANONYMOUS, "ab"));
    assert!(!plain("ab").matches(&ANONYMOUS, "a"));
}

#[test]
fn substitutions_stay_literal() {
    let rule = RuleFilter::parse("c/%c/#", Substitution::ClientIdAndUsername).unwrap();
    let wildcard_id = ClientIdentity {
        client_id: "+",
        username: None,
    };
    assert!(!rule.matches(&wildcard_id, "c/other/x"));
    let slash_id = ClientIdentity {
        client_id: "a/b",
        username: None,
    };
    assert!(rule.matches(&slash_id, "c/a/b/x"));
    assert!(!rule.matches(&slash_id, "c/a/x"));
    assert!(plain("c/%c").matches(&slash_id, "c/%c"));
}

#[test]
fn invalid_filters_are_refused() {
    for filter in ["a/#/b", "a+/b", "a/b#", "#x", "a\0b"] {
        assert!(
            RuleFilter::parse(filter, Substitution::Literal).is_err(),
            "{filter}"
        );
    }
    assert!(RuleFilter::parse(&"a".repeat(65_536), Substitution::Literal).is_err());
}

#[test]
fn levels_for_substitutes_and_splits() {
    let rule = RuleFilter::parse("u/%u/x%c/+", Substitution::ClientIdAndUsername).unwrap();
    let client = ClientIdentity {
        client_id: "1/2",
        username: Some("bob"),
    };
    let literal = |text: &str| Level::Literal(text.to_owned().into());
    let expected: Levels<'_> = [
        literal("u"),
        literal("bob"),
        literal("x1"),
        literal("2"),
        Level::SingleWildcard,
    ]
    .into_iter()
    .collect();
    assert_eq!(rule.levels_for(&client), Some(expected));
    assert_eq!(rule.levels_for(&ANONYMOUS), None);
}

#[test]
fn deep_filters_do_not_recurse() {
    let deep = "a/".repeat(30_000) + "#";
    let levels = subscription_levels(&deep);
    assert!(covers(&levels, &levels));
    assert!(overlaps(&levels, &levels));
}
