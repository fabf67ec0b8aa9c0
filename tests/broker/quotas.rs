//! Configured quotas and server-side policies: connection, session, subscription and retained
//! limits, payload format checks, the default keep-alive and a graceful shutdown.

use std::num::NonZeroU16;

use codec::{PayloadFormat, QoS, ReasonCode};

use crate::client::{
    QUIET, RawClient, V5, V311, connect_packet, persistent_connect, publish_packet,
};
use crate::harness::{TestBroker, wait_until};

#[test]
fn connections_beyond_max_connections_are_refused_until_one_leaves() {
    let broker = TestBroker::with_config("[connection]\nmax_connections = 2\n");
    let first = RawClient::connected_clean(broker.addr(), V5, "one");
    let mut second = RawClient::connected_clean(broker.addr(), V311, "two");
    let mut third = RawClient::open(broker.addr(), V5);
    third.send(&codec::Packet::from(connect_packet(V5, "three", true)));
    match third.expect_closed().as_slice() {
        [] => {}
        [codec::Packet::ConnAck(ack)] => assert_eq!(ack.reason_code, ReasonCode::QuotaExceeded),
        other => panic!("expected a refusal, got {other:?}"),
    }
    second.ping();
    first.disconnect();
    // The slot is free again once the broker has seen the close.
    wait_until("a free connection slot", || {
        let mut client = RawClient::open(broker.addr(), V5);
        client.send(&codec::Packet::from(connect_packet(V5, "four", true)));
        match client.next_event(crate::client::READ_TIMEOUT) {
            crate::client::Event::Packet(p) => {
                matches!(*p, codec::Packet::ConnAck(_)).then_some(())
            }
            _ => None,
        }
    });
}

#[test]
fn sessions_beyond_max_sessions_are_refused_with_0x97() {
    let broker = TestBroker::with_config("[sessions]\nmax_sessions = 2\n");
    let _a = RawClient::connected(broker.addr(), persistent_connect(V5, "keep-a", 300));
    let _b = RawClient::connected(broker.addr(), persistent_connect(V5, "keep-b", 300));
    let (mut c, connack) = RawClient::connect(broker.addr(), persistent_connect(V5, "keep-c", 300));
    assert_eq!(connack.reason_code, ReasonCode::QuotaExceeded);
    c.expect_closed();
    let (mut c, connack) = RawClient::connect(broker.addr(), connect_packet(V311, "keep-c", true));
    assert_eq!(
        connack.reason_code,
        ReasonCode::ServerUnavailable,
        "3.1.1 return code 3"
    );
    c.expect_closed();
}

#[test]
fn subscriptions_beyond_the_per_client_maximum_get_0x97() {
    let broker = TestBroker::with_config("[limits]\nmax_subscriptions_per_client = 2\n");
    let mut client = RawClient::connected_clean(broker.addr(), V5, "greedy-sub");
    client.subscribe("q/1", QoS::AtMostOnce);
    client.subscribe("q/2", QoS::AtMostOnce);
    let ack = client.subscribe_with(crate::client::subscribe_packet(
        9,
        "q/3",
        crate::client::qos_options(QoS::AtMostOnce),
    ));
    assert_eq!(ack.reason_codes, vec![ReasonCode::QuotaExceeded]);
    // Replacing an existing subscription is not a new one.
    client.subscribe("q/2", QoS::AtLeastOnce);
}

#[test]
fn retained_message_beyond_the_limit_is_delivered_but_not_retained() {
    let broker = TestBroker::with_config("[retained]\nmax_messages = 1\n");
    let mut sub = RawClient::connected_clean(broker.addr(), V5, "rl-sub");
    sub.subscribe("rl/+", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "rl-pub");
    for (i, topic) in ["rl/a", "rl/b"].into_iter().enumerate() {
        let mut publish = publish_packet(topic, b"r", QoS::AtLeastOnce, Some(1));
        publish.retain = true;
        assert_eq!(publisher.publish(publish), ReasonCode::Success);
        assert_eq!(sub.expect_publish_acked().topic(), topic, "delivered live");
        // A SUBACK comes once every shard applied the changes before it, the retained one too:
        // the limit is checked against the shard's replica.
        publisher.subscribe(&format!("rl/fence/{i}"), QoS::AtMostOnce);
    }
    let mut late = RawClient::connected_clean(broker.addr(), V5, "rl-late");
    late.subscribe("rl/+", QoS::AtLeastOnce);
    let kept: Vec<String> = late
        .drain_publishes(true)
        .iter()
        .map(|p| p.topic().to_string())
        .collect();
    assert_eq!(kept, ["rl/a"], "only the first fit the retained limit");
}

#[test]
fn invalid_utf8_payload_with_format_indicator_gets_0x99_and_is_not_forwarded() {
    let broker = TestBroker::start();
    let mut sub = RawClient::connected_clean(broker.addr(), V5, "pf-sub");
    sub.subscribe("pf", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pf-pub");
    let mut bad = publish_packet("pf", &[0xFF, 0xFE], QoS::AtLeastOnce, Some(1));
    bad.properties.make_mut().payload_format = Some(PayloadFormat::Utf8);
    assert_eq!(publisher.publish(bad), ReasonCode::PayloadFormatInvalid);
    let mut good = publish_packet("pf", "héllo".as_bytes(), QoS::AtLeastOnce, Some(2));
    good.properties.make_mut().payload_format = Some(PayloadFormat::Utf8);
    assert_eq!(publisher.publish(good), ReasonCode::Success);
    let got = sub.expect_publish_acked();
    assert_eq!(got.payload(), "héllo".as_bytes());
    assert_eq!(got.properties.payload_format, Some(PayloadFormat::Utf8));
    sub.ping();
    sub.expect_silence(QUIET);
}

#[test]
fn default_keep_alive_is_imposed_and_announced() {
    let broker = TestBroker::with_manual_clock("[connection]\ndefault_keep_alive = 1\n");
    let (mut client, connack) = RawClient::connect(broker.addr(), connect_packet(V5, "lazy", true));
    assert_eq!(connack.properties.server_keep_alive, Some(1));
    broker.advance(std::time::Duration::from_secs(2));
    client.expect_disconnect(ReasonCode::KeepAliveTimeout);
}

#[test]
fn shutdown_sends_disconnect_0x8b_to_v5_clients() {
    let broker = TestBroker::start();
    let mut v5 = RawClient::connected_clean(broker.addr(), V5, "stay-5");
    let mut v311 = RawClient::connected_clean(broker.addr(), V311, "stay-311");
    v5.ping();
    v311.ping();
    broker.stop();
    v5.expect_disconnect(ReasonCode::ServerShuttingDown);
    assert!(v311.expect_closed().is_empty());
}

#[test]
fn outbound_aliases_start_afresh_on_a_new_connection() {
    let broker = TestBroker::start();
    let mut connect = persistent_connect(V5, "alias-again", 300);
    connect.properties.topic_alias_maximum = Some(4);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "alias-again-pub");
    for round in 0..2 {
        let mut sub = RawClient::connected(broker.addr(), connect.clone());
        if round == 0 {
            sub.subscribe("again/t", QoS::AtMostOnce);
        }
        publisher.publish_simple("again/t", b"x", QoS::AtLeastOnce);
        let got = sub.expect_publish();
        assert_eq!(
            got.topic(),
            "again/t",
            "round {round}: the topic is sent with a new alias"
        );
        assert!(got.properties.topic_alias.is_some());
        sub.disconnect();
    }
}

#[test]
fn delayed_will_is_not_sent_when_the_session_is_taken_over() {
    let broker = TestBroker::with_manual_clock("");
    let mut watch = RawClient::connected_clean(broker.addr(), V5, "tw-watch");
    watch.subscribe("tw/will", QoS::AtLeastOnce);
    let mut connect = persistent_connect(V5, "tw", 60);
    connect.will = Some(codec::Will {
        topic: crate::client::s("tw/will"),
        payload: bytes::Bytes::from_static(b"gone"),
        qos: QoS::AtLeastOnce,
        retain: false,
        properties: codec::WillProperties {
            will_delay_interval: Some(1),
            ..Default::default()
        },
    });
    let mut old = RawClient::connected(broker.addr(), connect);
    let (mut new, connack) = RawClient::connect(broker.addr(), persistent_connect(V5, "tw", 60));
    assert!(connack.session_present);
    old.expect_disconnect(ReasonCode::SessionTakenOver);
    new.ping();
    // Well past the delay: no will.
    broker.advance(std::time::Duration::from_secs(2));
    new.ping();
    watch.ping();
    watch.expect_silence(QUIET);
}

#[test]
fn a_smaller_receive_maximum_after_reconnect_is_respected() {
    let broker = TestBroker::start();
    let mut connect = persistent_connect(V5, "shrink", 300);
    let mut sub = RawClient::connected(broker.addr(), connect.clone());
    sub.subscribe("shrink", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "shrink-pub");
    for i in 0..4u8 {
        publisher.publish_simple("shrink", &[i], QoS::AtLeastOnce);
    }
    for _ in 0..4 {
        sub.expect_publish(); // not acknowledged
    }
    sub.drop_abruptly();
    connect.properties.receive_maximum = NonZeroU16::new(1);
    let mut sub = RawClient::connected(broker.addr(), connect);
    // The four in flight are resent (already in flight, so beyond the new maximum is allowed);
    // after them the new maximum of one holds.
    let resent: Vec<u8> = (0..4)
        .map(|_| sub.expect_publish_acked().payload()[0])
        .collect();
    assert_eq!(resent, [0, 1, 2, 3]);
    publisher.publish_simple("shrink", &[4], QoS::AtLeastOnce);
    publisher.publish_simple("shrink", &[5], QoS::AtLeastOnce);
    let first = sub.expect_publish();
    sub.expect_silence(QUIET);
    sub.acknowledge(&first);
    assert_eq!(sub.expect_publish_acked().payload()[..], [5]);
}
