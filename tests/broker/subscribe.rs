//! SUBSCRIBE and UNSUBSCRIBE: when a subscription takes effect, overlapping subscriptions,
//! subscription identifiers and no-local.

use codec::{QoS, ReasonCode, SubscriptionId, SubscriptionOptions};

use crate::client::{Event, QUIET, RawClient, V5, V311, qos_options, subscribe_packet};
use crate::harness::TestBroker;

/// After SUBACK a subscription is in force on every shard: publishes by the subscriber itself
/// and by clients on any shard (four connections spread over both shards) all arrive.
#[test]
fn publish_right_after_suback_is_delivered() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut subscriber = RawClient::connected_clean(broker.addr(), protocol, "fast-sub");
        let mut publishers: Vec<RawClient> = (0..4)
            .map(|i| RawClient::connected_clean(broker.addr(), protocol, &format!("fast-pub{i}")))
            .collect();
        for round in 0..30 {
            let topic = format!("fast/{round}");
            subscriber.subscribe(&topic, QoS::AtMostOnce);
            subscriber.publish_simple(&topic, b"own", QoS::AtMostOnce);
            for publisher in &mut publishers {
                publisher.publish_simple(&topic, b"other", QoS::AtMostOnce);
            }
            let mut got: Vec<_> = (0..5)
                .map(|_| subscriber.expect_publish_on(&topic).payload().to_vec())
                .collect();
            got.sort();
            assert_eq!(
                got,
                [&b"other"[..]; 4]
                    .iter()
                    .chain([&&b"own"[..]])
                    .copied()
                    .collect::<Vec<_>>(),
                "round {round}"
            );
        }
    }
}

#[test]
fn unsubscribe_stops_delivery_and_reports_missing_filters() {
    let broker = TestBroker::start();
    let mut client = RawClient::connected_clean(broker.addr(), V5, "unsub");
    client.subscribe("u/t", QoS::AtLeastOnce);
    let ack = client.unsubscribe("u/t");
    assert_eq!(ack.reason_codes, vec![ReasonCode::Success]);
    let ack = client.unsubscribe("u/t");
    assert_eq!(ack.reason_codes, vec![ReasonCode::NoSubscriptionExisted]);
    assert_eq!(
        client.publish_simple("u/t", b"x", QoS::AtLeastOnce),
        ReasonCode::NoMatchingSubscribers
    );
}

#[test]
fn overlapping_subscriptions_deliver_once_with_max_qos_and_every_identifier() {
    let broker = TestBroker::start();
    let mut client = RawClient::connected_clean(broker.addr(), V5, "overlap");
    let subscriptions = [
        ("ov/+", QoS::AtLeastOnce, Some(1)),
        ("ov/#", QoS::ExactlyOnce, Some(2)),
        ("ov/t", QoS::AtMostOnce, None),
    ];
    for (i, (filter, qos, id)) in subscriptions.into_iter().enumerate() {
        let mut subscribe = subscribe_packet(i as u16 + 1, filter, qos_options(qos));
        subscribe.properties.subscription_identifier = id.and_then(SubscriptionId::new);
        assert_eq!(
            client.subscribe_with(subscribe).reason_codes,
            vec![ReasonCode::granted(qos)]
        );
    }
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "overlap-pub");
    publisher.publish_simple("ov/t", b"x", QoS::ExactlyOnce);
    let got = client.expect_publish_acked();
    assert_eq!(got.qos, QoS::ExactlyOnce, "the highest granted QoS");
    let mut ids: Vec<u32> = got
        .properties
        .subscription_identifiers
        .iter()
        .map(|id| id.get())
        .collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2], "every matching subscription's identifier");
    client.ping();
    client.expect_silence(QUIET);

    // 3.1.1: one copy too.
    let mut old = RawClient::connected_clean(broker.addr(), V311, "overlap-311");
    old.subscribe("ov/+", QoS::AtMostOnce);
    old.subscribe("ov/#", QoS::AtLeastOnce);
    publisher.publish_simple("ov/t", b"y", QoS::AtLeastOnce);
    assert_eq!(old.expect_publish_acked().qos, QoS::AtLeastOnce);
    old.ping();
    old.expect_silence(QUIET);
}

#[test]
fn no_local_skips_the_subscriber_own_publishes() {
    let broker = TestBroker::start();
    let mut client = RawClient::connected_clean(broker.addr(), V5, "no-local");
    let options = SubscriptionOptions {
        qos: QoS::AtLeastOnce,
        no_local: true,
        ..SubscriptionOptions::default()
    };
    client.subscribe_with(subscribe_packet(1, "nl/t", options));
    // A local delivery would be queued before the PUBACK on this same connection.
    assert_eq!(
        client.publish_simple("nl/t", b"own", QoS::AtLeastOnce),
        ReasonCode::NoMatchingSubscribers
    );
    client.ping();
    assert!(matches!(
        client.next_event(std::time::Duration::ZERO),
        Event::Timeout
    ));
    let mut other = RawClient::connected_clean(broker.addr(), V5, "no-local-other");
    other.publish_simple("nl/t", b"theirs", QoS::AtLeastOnce);
    assert_eq!(client.expect_publish_acked().payload(), b"theirs");
}

#[test]
fn invalid_filters_get_0x8f_and_shared_no_local_is_a_protocol_error() {
    let broker = TestBroker::start();
    let mut client = RawClient::connected_clean(broker.addr(), V5, "bad-filters");
    for (i, filter) in ["a/#/b", "a+/b", "$share/g", "$share//t"]
        .into_iter()
        .enumerate()
    {
        let ack = client.subscribe_with(subscribe_packet(
            i as u16 + 1,
            filter,
            qos_options(QoS::AtMostOnce),
        ));
        assert_eq!(
            ack.reason_codes,
            vec![ReasonCode::TopicFilterInvalid],
            "{filter}"
        );
    }
    let mut old = RawClient::connected_clean(broker.addr(), V311, "bad-filter-311");
    let ack = old.subscribe_with(subscribe_packet(1, "a/#/b", qos_options(QoS::AtMostOnce)));
    assert_eq!(
        ack.reason_codes,
        vec![ReasonCode::UnspecifiedError],
        "3.1.1 failure 0x80"
    );
    let options = SubscriptionOptions {
        no_local: true,
        ..SubscriptionOptions::default()
    };
    client.send(&codec::Packet::Subscribe(subscribe_packet(
        9,
        "$share/g/t",
        options,
    )));
    client.expect_disconnect(ReasonCode::ProtocolError);
}

#[test]
fn retained_messages_carry_the_subscription_identifier() {
    let broker = TestBroker::start();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "sid-pub");
    let mut retained = crate::client::publish_packet("sid/t", b"r", QoS::AtLeastOnce, Some(1));
    retained.retain = true;
    publisher.publish(retained);
    let mut client = RawClient::connected_clean(broker.addr(), V5, "sid-sub");
    let mut subscribe = subscribe_packet(1, "sid/#", qos_options(QoS::AtLeastOnce));
    subscribe.properties.subscription_identifier = SubscriptionId::new(77);
    client.subscribe_with(subscribe);
    let got = client.expect_publish_acked();
    assert!(got.retain);
    assert_eq!(
        got.properties.subscription_identifiers,
        vec![SubscriptionId::new(77).unwrap()]
    );
}

/// One retained-flagged QoS 0 message fanned out to a mix of subscribers on both shards: 3.1.1
/// and 5.0, with and without Retain As Published, with and without a subscription identifier.
/// Each gets the frame its own options describe (the shard reuses one encoded frame only
/// between recipients whose frames are identical).
#[test]
fn a_fan_out_gives_each_subscriber_its_own_frame() {
    let broker = TestBroker::start();
    let mut subscribers = Vec::new();
    for (index, (protocol, as_published, id)) in [
        (V311, false, None),
        (V5, false, None),
        (V5, true, None),
        (V5, false, Some(9)),
        (V311, false, None),
        (V5, true, Some(4)),
    ]
    .into_iter()
    .enumerate()
    {
        let mut client =
            RawClient::connected_clean(broker.addr(), protocol, &format!("mix-sub{index}"));
        let mut subscribe = subscribe_packet(
            1,
            "mix/t",
            SubscriptionOptions {
                retain_as_published: as_published,
                ..qos_options(QoS::AtMostOnce)
            },
        );
        subscribe.properties.subscription_identifier = id.and_then(SubscriptionId::new);
        client.subscribe_with(subscribe);
        subscribers.push((client, as_published, id));
    }
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "mix-pub");
    let mut publish = crate::client::publish_packet("mix/t", b"payload", QoS::AtMostOnce, None);
    publish.retain = true;
    publisher.publish(publish);
    for (client, as_published, id) in &mut subscribers {
        let got = client.expect_publish_on("mix/t");
        assert_eq!(got.payload(), &b"payload"[..]);
        // A retained message published live is delivered with RETAIN only as published.
        assert_eq!(got.retain, *as_published && client.protocol.is_v5());
        let ids: Vec<u32> = got
            .properties
            .subscription_identifiers
            .iter()
            .map(|i| i.get())
            .collect();
        assert_eq!(ids, id.iter().copied().collect::<Vec<_>>());
    }
}
