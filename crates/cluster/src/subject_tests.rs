//! The subject mapping: round trips and agreement with the router's matching.

use proptest::prelude::*;
use router::{TopicFilter, TopicLimits, TopicName};

use super::*;

const PREFIX: &str = "ringmq";

fn nats_matches(pattern: &str, subject: &str) -> bool {
    subject_matches(pattern, subject)
}

const MSG: Root = Root::Messages;

#[test]
fn escapes_what_nats_reserves() {
    assert_eq!(topic_to_subject(PREFIX, MSG, "a/b"), "ringmq.msg.a.b");
    assert_eq!(
        topic_to_subject(PREFIX, MSG, "v1.2/*/>/50%/x y"),
        "ringmq.msg.v1%2E2.%2A.%3E.50%25.x%20y"
    );
    assert_eq!(
        topic_to_subject(PREFIX, MSG, "/a//"),
        "ringmq.msg.%_.a.%_.%_"
    );
    assert_eq!(topic_to_subject(PREFIX, MSG, "ü/$SYS"), "ringmq.msg.ü.$SYS");
}

#[test]
fn filters_map_wildcards_and_the_parent_level() {
    assert_eq!(
        filter_subjects(PREFIX, MSG, "a/+/c"),
        vec!["ringmq.msg.a.*.c"]
    );
    assert_eq!(
        filter_subjects(PREFIX, MSG, "a/b/#"),
        vec!["ringmq.msg.a.b.>", "ringmq.msg.a.b"]
    );
    assert_eq!(filter_subjects(PREFIX, MSG, "#"), vec!["ringmq.msg.>"]);
    assert_eq!(
        filter_subjects(PREFIX, MSG, "+/#"),
        vec!["ringmq.msg.*.>", "ringmq.msg.*"]
    );
}

#[test]
fn queue_groups_differ_by_group_and_filter() {
    assert_eq!(queue_group("$share/g/a/+"), "$share/g/a/+");
    assert_eq!(queue_group("$share/g.1/a b"), "$share/g%2E1/a%20b");
    assert_ne!(queue_group("$share/g/a/#"), queue_group("$share/g/a/+"));
}

#[test]
fn malformed_subjects_are_refused() {
    assert!(matches!(
        subject_to_topic(PREFIX, "other.msg.a"),
        Err(SubjectError::OutsidePrefix(_))
    ));
    for bad in [
        "ringmq.msg.a%",
        "ringmq.msg.a%4",
        "ringmq.msg.%41",
        "ringmq.msg.%zz",
    ] {
        assert!(
            matches!(
                subject_to_topic(PREFIX, bad),
                Err(SubjectError::BadEscape(_))
            ),
            "{bad}"
        );
    }
}

/// Levels that exercise every escape, the empty level and `$`.
fn level() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("x.y".to_owned()),
        Just("*".to_owned()),
        Just(">".to_owned()),
        Just("%_".to_owned()),
        Just("%2E".to_owned()),
        Just("sp ace\t".to_owned()),
        Just("$s".to_owned()),
        "[a-c%.*> \u{e9}\u{1F600}]{0,4}",
    ]
}

fn topic() -> impl Strategy<Value = String> {
    prop::collection::vec(level(), 1..5).prop_map(|levels| levels.join("/"))
}

fn filter() -> impl Strategy<Value = String> {
    let level = prop_oneof![3 => level(), 1 => Just("+".to_owned())];
    (prop::collection::vec(level, 1..5), any::<bool>()).prop_map(|(mut levels, hash)| {
        if hash {
            levels.push("#".to_owned());
        }
        levels.join("/")
    })
}

proptest! {
    #[test]
    fn topics_round_trip(topic in topic()) {
        let subject = topic_to_subject(PREFIX, MSG, &topic);
        prop_assert!(!subject.contains(' '));
        prop_assert_eq!(subject.split('.').count(), topic.split('/').count() + 2);
        prop_assert_eq!(subject_to_topic(PREFIX, &subject), Ok(topic));
    }

    #[test]
    fn subjects_match_what_the_router_matches(topic in topic(), filter in filter()) {
        let limits = TopicLimits::default();
        let (Ok(name), Ok(parsed)) = (TopicName::new(&topic, &limits), TopicFilter::new(&filter, &limits)) else {
            return Ok(());
        };
        let subject = topic_to_subject(PREFIX, MSG, &topic);
        let nats = filter_subjects(PREFIX, MSG, &filter).iter().any(|s| nats_matches(s, &subject));
        let mqtt = parsed.matches(&name);
        if topic.starts_with('$') {
            // NATS wildcards match `$` topics too; the router decides on the receiving node.
            prop_assert!(nats || !mqtt, "{topic} {filter}");
        } else {
            prop_assert_eq!(nats, mqtt, "{} {}", topic, filter);
        }
    }
}

#[test]
fn wildcards_match_on_a_corpus() {
    let limits = TopicLimits::default();
    let topics = ["a", "a/b", "a/b/c", "a//c", "/", "b/a", "a/x.y", "$SYS/a"];
    let filters = [
        "a/#", "#", "+", "a/+", "+/+", "a/+/c", "/#", "+/b/#", "a/x.y",
    ];
    for topic in topics {
        for filter in filters {
            let subject = topic_to_subject(PREFIX, MSG, topic);
            let nats = filter_subjects(PREFIX, MSG, filter)
                .iter()
                .any(|s| nats_matches(s, &subject));
            let mqtt = TopicFilter::new(filter, &limits)
                .unwrap()
                .matches(&TopicName::new(topic, &limits).unwrap());
            if !topic.starts_with('$') {
                assert_eq!(nats, mqtt, "{topic} against {filter}");
            }
        }
    }
}

#[test]
fn qos_1_and_2_travel_under_their_own_root_and_decode_the_same() {
    assert_eq!(Root::of(codec::QoS::AtMostOnce), Root::Messages);
    assert_eq!(Root::of(codec::QoS::ExactlyOnce), Root::Reliable);
    let subject = topic_to_subject(PREFIX, Root::Reliable, "a/b.c");
    assert_eq!(subject, "ringmq.rel.a.b%2Ec");
    assert_eq!(subject_to_topic(PREFIX, &subject).unwrap(), "a/b.c");
    assert_eq!(
        filter_subjects(PREFIX, Root::Reliable, "a/#"),
        vec!["ringmq.rel.a.>", "ringmq.rel.a"]
    );
    assert!(subject_to_topic(PREFIX, "ringmq.queue.a").is_err());
}

#[test]
fn subject_matching_follows_nats() {
    assert!(subject_matches("r.msg.>", "r.msg.a.b"));
    assert!(!subject_matches("r.msg.>", "r.msg"));
    assert!(subject_matches("r.msg.*.b", "r.msg.a.b"));
    assert!(!subject_matches("r.msg.*", "r.msg.a.b"));
    assert!(!subject_matches("r.msg.a.b", "r.msg.a"));
    assert!(!subject_matches("r.rel.a", "r.msg.a"));
}
