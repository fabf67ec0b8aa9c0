//! Validation rules of topic names, topic filters and shared filters (MQTT 4.7, 4.8.2).

use bytes::Bytes;
use router::{SharedFilter, SubscriptionFilter, TopicError, TopicFilter, TopicLimits, TopicName};

fn name(text: &str) -> Result<TopicName, TopicError> {
    text.parse()
}

fn filter(text: &str) -> Result<TopicFilter, TopicError> {
    text.parse()
}

fn shared(text: &str) -> Result<SharedFilter, TopicError> {
    text.parse()
}

#[test]
fn names_accept_spaces_empty_levels_and_dollar() {
    for ok in [
        "a",
        "/",
        "//",
        "a//b",
        "/finance",
        "sport/tennis ",
        " ",
        "$SYS/x",
        "ü/€",
    ] {
        assert_eq!(name(ok).map(|n| n.to_string()), Ok(ok.to_owned()), "{ok:?}");
    }
}

#[test]
fn names_reject_each_broken_rule() {
    assert_eq!(name(""), Err(TopicError::Empty));
    assert_eq!(
        name("a/+/b"),
        Err(TopicError::WildcardInName {
            offset: 2,
            wildcard: '+'
        })
    );
    assert_eq!(
        name("a#"),
        Err(TopicError::WildcardInName {
            offset: 1,
            wildcard: '#'
        })
    );
    assert_eq!(name("a\0b"), Err(TopicError::NullCharacter { offset: 1 }));
    let bad_utf8 = Bytes::from_static(b"ab\xffc");
    assert_eq!(
        TopicName::from_bytes(bad_utf8, &TopicLimits::default()),
        Err(TopicError::InvalidUtf8 { valid_up_to: 2 })
    );
}

#[test]
fn length_and_level_limits_are_configurable_and_capped_by_the_protocol() {
    let limits = TopicLimits {
        max_length: 5,
        max_levels: 3,
    };
    assert!(TopicName::new("a/b/c", &limits).is_ok());
    assert_eq!(
        TopicName::new("a/b/cd", &limits),
        Err(TopicError::TooLong { len: 6, max: 5 })
    );
    assert_eq!(
        TopicFilter::new("a/b/", &limits).map(|_| ()),
        Ok(()),
        "three levels, the last one empty"
    );
    assert_eq!(
        TopicFilter::new("///", &limits),
        Err(TopicError::TooManyLevels { levels: 4, max: 3 })
    );
    let unbounded = TopicLimits {
        max_length: usize::MAX,
        max_levels: usize::MAX,
    };
    let longest = "a".repeat(65_535);
    assert!(TopicName::new(&longest, &unbounded).is_ok());
    assert_eq!(
        TopicName::new(&format!("{longest}a"), &unbounded),
        Err(TopicError::TooLong {
            len: 65_536,
            max: 65_535
        })
    );
    let deep = "/".repeat(200);
    assert_eq!(
        name(&deep),
        Err(TopicError::TooManyLevels {
            levels: 201,
            max: 128
        }),
        "the default level limit is 128"
    );
}

#[test]
fn filters_follow_the_spec_examples_of_4_7_1() {
    for ok in [
        "sport/tennis/player1/#",
        "sport/#",
        "#",
        "sport/tennis/#",
        "+",
        "+/tennis/#",
        "sport/+/player1",
        "/+",
        "+/+",
        "$SYS/#",
        "a//+/",
        "$share",
    ] {
        assert!(filter(ok).is_ok(), "{ok:?} is a valid filter");
    }
    assert_eq!(
        filter("sport/tennis#"),
        Err(TopicError::MultiLevelWildcardNotWholeLevel { offset: 12 })
    );
    assert_eq!(
        filter("sport/tennis/#/ranking"),
        Err(TopicError::MultiLevelWildcardNotLast { offset: 13 })
    );
    assert_eq!(
        filter("sport+"),
        Err(TopicError::SingleLevelWildcardNotWholeLevel { offset: 5 })
    );
    assert_eq!(
        filter("a/b+c/d"),
        Err(TopicError::SingleLevelWildcardNotWholeLevel { offset: 3 })
    );
    assert_eq!(filter(""), Err(TopicError::Empty));
    assert_eq!(filter("a/\0"), Err(TopicError::NullCharacter { offset: 2 }));
    assert_eq!(
        filter("$share/g/a"),
        Err(TopicError::SharePrefixInPlainFilter)
    );
}

#[test]
fn levels_iterate_without_dropping_empty_levels() {
    let topic = name("/a//b/").expect("valid");
    assert_eq!(topic.levels().collect::<Vec<_>>(), ["", "a", "", "b", ""]);
    let wild = filter("+/#").expect("valid");
    assert_eq!(wild.levels().collect::<Vec<_>>(), ["+", "#"]);
    assert!(wild.has_wildcards() && wild.starts_with_wildcard());
    assert!(!filter("a/b").expect("valid").has_wildcards());
}

#[test]
fn shared_filters_follow_4_8_2() {
    let tennis = shared("$share/consumer1/sport/tennis/+").expect("valid");
    assert_eq!(tennis.share_name(), "consumer1");
    assert_eq!(tennis.filter().as_str(), "sport/tennis/+");
    let finance = shared("$share/consumer1//finance").expect("valid");
    assert_eq!(finance.filter().as_str(), "/finance");
    assert_ne!(
        tennis,
        shared("$share/consumer2/sport/tennis/+").expect("valid")
    );

    assert_eq!(shared("$share/"), Err(TopicError::EmptyShareName));
    assert_eq!(shared("$share//a"), Err(TopicError::EmptyShareName));
    assert_eq!(
        shared("$share/g"),
        Err(TopicError::MissingSharedTopicFilter)
    );
    assert_eq!(
        shared("$share/g/"),
        Err(TopicError::MissingSharedTopicFilter)
    );
    assert_eq!(
        shared("$share/g+h/a"),
        Err(TopicError::WildcardInShareName {
            offset: 8,
            wildcard: '+'
        })
    );
    assert_eq!(
        shared("$share/#/a"),
        Err(TopicError::WildcardInShareName {
            offset: 7,
            wildcard: '#'
        })
    );
    assert_eq!(
        shared("$share/g/a/#/b"),
        Err(TopicError::MultiLevelWildcardNotLast { offset: 11 })
    );
    assert_eq!(shared("a/b"), Err(TopicError::MissingSharePrefix));
}

#[test]
fn subscription_filters_dispatch_on_the_share_prefix() {
    let plain: SubscriptionFilter = "$sharex/a".parse().expect("valid");
    assert!(matches!(plain, SubscriptionFilter::Plain(_)));
    let group: SubscriptionFilter = "$share/g/a/#".parse().expect("valid");
    assert!(matches!(group, SubscriptionFilter::Shared(_)));
    assert_eq!(group.topic_filter().as_str(), "a/#");
    assert_eq!(group.as_str(), "$share/g/a/#");
}

#[test]
fn detached_copies_compare_equal() {
    let buffer = Bytes::from_static(b"xxsport/tennis");
    let topic = TopicName::from_bytes(buffer.slice(2..), &TopicLimits::default()).expect("valid");
    let copy = topic.detached();
    assert_eq!(copy, topic);
    assert_ne!(copy.as_bytes().as_ptr(), topic.as_bytes().as_ptr());
}

/// Every string over a small alphabet (levels, both wildcards, a two-byte character) up to
/// `max_chars` characters.
fn strings_over_small_alphabet(max_chars: usize) -> Vec<String> {
    let alphabet = ['a', '/', '+', '#', 'é'];
    let mut all = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..max_chars {
        last = (last.iter())
            .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
            .collect();
        all.extend(last.iter().cloned());
    }
    all
}

#[test]
fn a_decoded_string_gives_the_same_name_or_error_as_its_bytes() {
    // Tight limits, so that lengths and levels are refused too, alone and beside a wildcard.
    let limits = TopicLimits {
        max_length: 6,
        max_levels: 3,
    };
    for text in strings_over_small_alphabet(5) {
        let bytes = Bytes::copy_from_slice(text.as_bytes());
        let decoded = codec::MqttStr::try_from(text.as_str()).expect("valid MQTT string");
        assert_eq!(
            TopicName::from_mqtt_str(decoded, &limits),
            TopicName::from_bytes(bytes, &limits),
            "{text:?}"
        );
    }
}
