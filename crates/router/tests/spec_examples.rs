//! The MQTT 5.0 specification's examples for wildcards (4.7.1.2, 4.7.1.3, 4.7.2) and shared
//! subscriptions (4.8.2), checked both through `TopicFilter::matches` and through the table.

use router::{
    Matches, Publisher, QoS, SubscriberId, SubscriptionFilter, SubscriptionId, SubscriptionOptions,
    SubscriptionTable, TopicFilter, TopicName,
};

fn topic(text: &str) -> TopicName {
    text.parse().expect("valid topic name")
}

fn sub_filter(text: &str) -> SubscriptionFilter {
    text.parse().expect("valid filter")
}

/// Checks one (filter, topic, expected) triple through the single-filter matcher and through a
/// table holding only that filter.
fn check(filter: &str, name: &str, expected: bool) {
    let parsed: TopicFilter = filter.parse().expect("valid filter");
    assert_eq!(
        parsed.matches(&topic(name)),
        expected,
        "TopicFilter::matches({filter:?}, {name:?})"
    );
    let mut table = SubscriptionTable::default();
    table.subscribe(
        SubscriberId(1),
        &sub_filter(filter),
        SubscriptionOptions::default(),
        None,
    );
    let mut out = Matches::new();
    table.match_topic(&topic(name), &Publisher::default(), &mut out);
    assert_eq!(
        out.len(),
        usize::from(expected),
        "table: {filter:?} vs {name:?}"
    );
}

#[test]
fn multi_level_wildcard_4_7_1_2() {
    for name in [
        "sport/tennis/player1",
        "sport/tennis/player1/ranking",
        "sport/tennis/player1/score/wimbledon",
    ] {
        check("sport/tennis/player1/#", name, true);
    }
    check("sport/#", "sport", true);
    check("#", "sport/tennis", true);
    check("#", "/", true);
    check("sport/tennis/#", "sport/tennis", true);
    check("sport/tennis/#", "sport/tennisx", false);
    check("sport/tennis/player1/#", "sport/tennis/player2", false);
}

#[test]
fn single_level_wildcard_4_7_1_3() {
    check("sport/tennis/+", "sport/tennis/player1", true);
    check("sport/tennis/+", "sport/tennis/player2", true);
    check("sport/tennis/+", "sport/tennis/player1/ranking", false);
    check("sport/+", "sport", false);
    check("sport/+", "sport/", true);
    check("+", "sport", true);
    check("+/tennis/#", "sport/tennis/player1", true);
    check("sport/+/player1", "sport/tennis/player1", true);
    check("+/+", "/finance", true);
    check("/+", "/finance", true);
    check("+", "/finance", false);
}

#[test]
fn dollar_topics_4_7_2() {
    check("#", "$SYS/monitor/Clients", false);
    check("+/monitor/Clients", "$SYS/monitor/Clients", false);
    check("$SYS/#", "$SYS/monitor/Clients", true);
    check("$SYS/monitor/+", "$SYS/monitor/Clients", true);
    check("$SYS/#", "$SYS", true);
    check("+", "$", false);
    check("a/+", "a/$b", true);
    check("a/#", "a/$b", true);
}

#[test]
fn topics_are_case_sensitive_and_keep_spaces_4_7_3() {
    check("ACCOUNTS", "accounts", false);
    check("Accounts payable", "Accounts payable", true);
    check("/finance", "finance", false);
    check("/", "/", true);
}

#[test]
fn shared_subscriptions_4_8_2_each_group_gets_one_copy() {
    let mut table = SubscriptionTable::default();
    let options = SubscriptionOptions {
        qos: QoS::AtLeastOnce,
        ..SubscriptionOptions::default()
    };
    // Two groups on the same filter and one on "/finance" (the filter after "$share/consumer1/").
    for (n, text) in [
        (1, "$share/consumer1/sport/tennis/+"),
        (2, "$share/consumer1/sport/tennis/+"),
        (3, "$share/consumer2/sport/tennis/+"),
        (4, "$share/consumer1//finance"),
        (5, "sport/#"),
    ] {
        let id = SubscriptionId::new(100 + n);
        table.subscribe(SubscriberId(u64::from(n)), &sub_filter(text), options, id);
    }
    let mut out = Matches::new();
    table.match_topic(
        &topic("sport/tennis/player1"),
        &Publisher::default(),
        &mut out,
    );
    let plain: Vec<_> = out.iter().filter(|d| d.shared.is_none()).collect();
    let shared: Vec<_> = out.iter().filter(|d| d.shared.is_some()).collect();
    assert_eq!(plain.len(), 1);
    assert_eq!(plain[0].subscriber, SubscriberId(5));
    assert_eq!(shared.len(), 2, "one copy per group");
    let consumer1 = shared
        .iter()
        .find(|d| d.shared.map(|s| s.share_name()) == Some("consumer1"))
        .expect("consumer1 delivers");
    assert!([SubscriberId(1), SubscriberId(2)].contains(&consumer1.subscriber));
    assert_eq!(
        consumer1.subscription_ids,
        [SubscriptionId::new(100 + consumer1.subscriber.0 as u32).expect("in range")]
    );
    let consumer2 = shared
        .iter()
        .find(|d| d.shared.map(|s| s.share_name()) == Some("consumer2"))
        .expect("consumer2 delivers");
    assert_eq!(consumer2.subscriber, SubscriberId(3));

    table.match_topic(&topic("/finance"), &Publisher::default(), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out.get(0).map(|d| d.subscriber), Some(SubscriberId(4)));
    table.match_topic(&topic("finance"), &Publisher::default(), &mut out);
    assert!(out.is_empty());
}

#[test]
fn a_subscriber_with_shared_and_plain_subscriptions_can_get_two_copies() {
    let mut table = SubscriptionTable::default();
    let options = SubscriptionOptions::default();
    table.subscribe(SubscriberId(7), &sub_filter("a/b"), options, None);
    table.subscribe(SubscriberId(7), &sub_filter("$share/g/a/+"), options, None);
    let mut out = Matches::new();
    table.match_topic(&topic("a/b"), &Publisher::default(), &mut out);
    let receivers: Vec<_> = out
        .iter()
        .map(|d| (d.subscriber, d.shared.is_some()))
        .collect();
    assert_eq!(
        receivers,
        [(SubscriberId(7), false), (SubscriberId(7), true)]
    );
}

#[test]
fn reaches_tells_whether_a_subscriber_already_gets_a_message() {
    let mut table = SubscriptionTable::default();
    let (subscriber, other) = (SubscriberId(1), SubscriberId(2));
    let no_local = SubscriptionOptions {
        no_local: true,
        ..SubscriptionOptions::default()
    };
    table.subscribe(subscriber, &sub_filter("sport/+"), no_local, None);
    table.subscribe(
        other,
        &sub_filter("$share/g/sport/#"),
        SubscriptionOptions::default(),
        None,
    );
    let name = topic("sport/tennis");
    assert!(table.reaches(&name, subscriber, None));
    assert!(table.reaches(&name, subscriber, Some(other)));
    assert!(
        !table.reaches(&name, subscriber, Some(subscriber)),
        "no-local: its own message does not reach it"
    );
    assert!(!table.reaches(&topic("sport/tennis/x"), subscriber, None));
    assert!(
        !table.reaches(&name, other, None),
        "a shared membership is not counted"
    );
}
