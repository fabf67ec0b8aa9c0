//! Keep-alive expiry, topic aliases both ways, Receive Maximum both ways and Maximum Packet Size
//! both ways.

use std::num::{NonZeroU16, NonZeroU32};
use std::time::Duration;

use codec::{Packet, PubAck, PubRel, QoS, ReasonCode};

use crate::client::{QUIET, RawClient, V5, V311, connect_packet, pid, publish_packet};
use crate::harness::TestBroker;

#[test]
fn keep_alive_expiry_disconnects_with_0x8d_in_v5_and_closes_in_v311() {
    let broker = TestBroker::with_manual_clock("");
    for protocol in [V311, V5] {
        let mut connect = connect_packet(protocol, "sleepy", true);
        connect.keep_alive = 1;
        let mut client = RawClient::connected(broker.addr(), connect);
        // Within the grace of one and a half keep-alives the connection stays.
        broker.advance(Duration::from_millis(1400));
        client.ping();
        broker.advance(Duration::from_secs(2));
        client.expect_disconnect(ReasonCode::KeepAliveTimeout);
    }
}

#[test]
fn packets_within_the_keep_alive_keep_the_connection_open() {
    let broker = TestBroker::with_manual_clock("");
    let mut connect = connect_packet(V5, "awake", true);
    connect.keep_alive = 1;
    let mut client = RawClient::connected(broker.addr(), connect);
    // 2.4 s of pings every 0.4 s: beyond the 1.5 s grace if the pings were not counted.
    for _ in 0..6 {
        broker.advance(Duration::from_millis(400));
        client.ping();
    }
    // Then silence past the grace.
    broker.advance(Duration::from_millis(1600));
    client.expect_disconnect(ReasonCode::KeepAliveTimeout);
}

#[test]
fn inbound_topic_alias_is_set_then_used() {
    let broker = TestBroker::start();
    let mut sub = RawClient::connected_clean(broker.addr(), V5, "alias-sub");
    sub.subscribe("alias/#", QoS::AtMostOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "alias-pub");
    let mut set = publish_packet("alias/long/topic", b"1", QoS::AtMostOnce, None);
    set.properties.make_mut().topic_alias = NonZeroU16::new(1);
    publisher.send(&Packet::Publish(set));
    let mut used = publish_packet("", b"2", QoS::AtLeastOnce, Some(1));
    used.properties.make_mut().topic_alias = NonZeroU16::new(1);
    assert_eq!(publisher.publish(used), ReasonCode::Success);
    for payload in [b"1", b"2"] {
        let got = sub.expect_publish();
        assert_eq!(got.topic(), "alias/long/topic");
        assert_eq!(got.payload(), payload);
        assert_eq!(
            got.properties.topic_alias, None,
            "aliases are not forwarded"
        );
    }
}

#[test]
fn invalid_inbound_topic_alias_is_0x94_and_unknown_alias_0x82() {
    let broker = TestBroker::with_config("[limits]\ntopic_alias_maximum = 2\n");
    // Out of range: Topic Alias Invalid. In range but never set (empty topic): a Protocol
    // Error (MQTT 5.0 3.3.4).
    let cases = [
        ("alias/over", 3, ReasonCode::TopicAliasInvalid),
        ("", 2, ReasonCode::ProtocolError),
    ];
    for (topic, alias, reason) in cases {
        let mut client = RawClient::connected_clean(broker.addr(), V5, "bad-alias");
        let mut publish = publish_packet(topic, b"x", QoS::AtMostOnce, None);
        publish.properties.make_mut().topic_alias = NonZeroU16::new(alias);
        client.send(&Packet::Publish(publish));
        client.expect_disconnect(reason);
    }
    // Topic alias 0 (written by hand: the codec refuses to encode it).
    let mut client = RawClient::connected_clean(broker.addr(), V5, "zero-alias");
    client.send_raw(&[0x30, 0x08, 0x00, 0x01, b't', 0x03, 0x23, 0x00, 0x00, b'x']);
    client.expect_disconnect(ReasonCode::TopicAliasInvalid);
}

#[test]
fn topic_alias_refused_when_the_broker_allows_none() {
    let broker = TestBroker::with_config("[limits]\ntopic_alias_maximum = 0\n");
    let (mut client, connack) =
        RawClient::connect(broker.addr(), connect_packet(V5, "no-alias", true));
    assert_eq!(connack.properties.topic_alias_maximum, Some(0));
    let mut publish = publish_packet("t", b"x", QoS::AtMostOnce, None);
    publish.properties.make_mut().topic_alias = NonZeroU16::new(1);
    client.send(&Packet::Publish(publish));
    client.expect_disconnect(ReasonCode::TopicAliasInvalid);
}

/// A subscriber that allows `max` topic aliases.
fn alias_subscriber(broker: &TestBroker, id: &str, max: Option<u16>) -> RawClient {
    let mut connect = connect_packet(V5, id, true);
    connect.properties.topic_alias_maximum = max;
    let mut client = RawClient::connected(broker.addr(), connect);
    client.subscribe("out/+", QoS::AtMostOnce);
    client
}

#[test]
fn outbound_topic_aliases_follow_the_client_maximum() {
    let broker = TestBroker::start();
    let mut sub = alias_subscriber(&broker, "out-alias", Some(2));
    let mut plain = alias_subscriber(&broker, "out-plain", None);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "out-pub");
    let topics = [
        "out/a", "out/a", "out/b", "out/a", "out/c", "out/c", "out/b",
    ];
    for topic in topics {
        publisher.publish_simple(topic, topic.as_bytes(), QoS::AtMostOnce);
    }
    // The client resolves aliases as a 5.0 receiver must.
    let mut known: std::collections::HashMap<u16, String> = Default::default();
    for expected in topics {
        let got = sub.expect_publish();
        let alias = got.properties.topic_alias.map(NonZeroU16::get);
        let topic = match alias {
            Some(alias) => {
                assert!(alias <= 2, "alias {alias} above the client's maximum");
                if !got.topic().is_empty() {
                    known.insert(alias, got.topic().to_string());
                }
                known
                    .get(&alias)
                    .cloned()
                    .expect("alias was set before use")
            }
            None => got.topic().to_string(),
        };
        assert_eq!(topic, expected);
        assert_eq!(got.payload(), expected.as_bytes());
        let untouched = plain.expect_publish();
        assert_eq!(untouched.topic(), expected);
        assert_eq!(untouched.properties.topic_alias, None);
    }
    assert!(!known.is_empty(), "aliases were used");
}

#[test]
fn broker_respects_the_client_receive_maximum() {
    let broker = TestBroker::start();
    let mut connect = connect_packet(V5, "rm-sub", true);
    connect.properties.receive_maximum = NonZeroU16::new(2);
    let mut sub = RawClient::connected(broker.addr(), connect);
    sub.subscribe("rm", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "rm-pub");
    for i in 0..6u8 {
        publisher.publish_simple("rm", &[i], QoS::AtLeastOnce);
    }
    let mut inflight = std::collections::VecDeque::new();
    for i in 0..6u8 {
        if inflight.len() == 2 {
            sub.expect_silence(QUIET);
            let oldest = inflight.pop_front().expect("two in flight");
            sub.send(&Packet::PubAck(PubAck::new(oldest)));
        }
        let got = sub.expect_publish();
        assert_eq!(got.payload()[..], [i], "in order");
        inflight.push_back(got.packet_id.expect("QoS 1 has a packet id"));
    }
}

#[test]
fn client_exceeding_our_receive_maximum_with_qos2_gets_0x93() {
    let broker = TestBroker::with_config("[limits]\nreceive_maximum = 2\n");
    let mut client = RawClient::connected_clean(broker.addr(), V5, "greedy");
    for id in 1..=2 {
        client.send(&Packet::Publish(publish_packet(
            "rm/in",
            b"x",
            QoS::ExactlyOnce,
            Some(id),
        )));
        assert!(matches!(client.recv(), Packet::PubRec(_)));
    }
    // Releasing one makes room again.
    client.send(&Packet::PubRel(PubRel::new(pid(1))));
    assert!(matches!(client.recv(), Packet::PubComp(_)));
    client.send(&Packet::Publish(publish_packet(
        "rm/in",
        b"x",
        QoS::ExactlyOnce,
        Some(3),
    )));
    assert!(matches!(client.recv(), Packet::PubRec(_)));
    client.send(&Packet::Publish(publish_packet(
        "rm/in",
        b"x",
        QoS::ExactlyOnce,
        Some(4),
    )));
    client.expect_disconnect(ReasonCode::ReceiveMaximumExceeded);
}

#[test]
fn too_large_inbound_packet_is_0x95_in_v5_and_a_close_in_v311() {
    let broker = TestBroker::with_config("[limits]\nmax_packet_size = 256\n");
    for protocol in [V311, V5] {
        let mut client = RawClient::connected_clean(broker.addr(), protocol, "big");
        client.publish_simple("size", &[b'x'; 200], QoS::AtMostOnce);
        client.ping();
        client.send(&Packet::Publish(publish_packet(
            "size",
            &[b'x'; 300],
            QoS::AtMostOnce,
            None,
        )));
        client.expect_disconnect(ReasonCode::PacketTooLarge);
    }
}

#[test]
fn messages_larger_than_the_client_maximum_packet_size_are_not_sent() {
    let broker = TestBroker::start();
    let mut connect = connect_packet(V5, "small-sub", true);
    connect.properties.maximum_packet_size = NonZeroU32::new(100);
    let mut sub = RawClient::connected(broker.addr(), connect);
    sub.subscribe("mps", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "mps-pub");
    for (payload, qos) in [
        (vec![b'a'; 200], QoS::AtLeastOnce),
        (vec![b'b'; 10], QoS::AtLeastOnce),
        (vec![b'c'; 200], QoS::AtMostOnce),
        (vec![b'd'; 10], QoS::AtMostOnce),
    ] {
        publisher.publish_simple("mps", &payload, qos);
    }
    assert_eq!(sub.expect_publish_acked().payload(), &[b'b'; 10]);
    assert_eq!(sub.expect_publish_acked().payload(), &[b'd'; 10]);
    sub.ping();
    sub.expect_silence(QUIET);
}

/// A Subscription Identifier is for server-to-client PUBLISH only (MQTT 5.0 3.3.4): from a
/// client it is a Protocol Error.
#[test]
fn client_publish_with_a_subscription_identifier_is_0x82() {
    let broker = TestBroker::start();
    let mut client = RawClient::connected_clean(broker.addr(), V5, "sub-id-pub");
    let mut publish = publish_packet("a/b", b"x", QoS::AtLeastOnce, Some(1));
    let id = codec::SubscriptionId::new(7).expect("7 is a valid identifier");
    publish
        .properties
        .make_mut()
        .subscription_identifiers
        .push(id);
    client.send(&Packet::Publish(publish));
    client.expect_disconnect(ReasonCode::ProtocolError);
}
