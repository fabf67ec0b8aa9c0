//! Message expiry (expired queued messages are not delivered; the remaining interval is
//! forwarded) and session expiry (the session is gone after its interval).

use std::time::Duration;

use codec::{Disconnect, DisconnectProperties, Packet, QoS, ReasonCode};

use crate::client::{RawClient, V5, V311, connect_packet, persistent_connect, publish_packet};
use crate::harness::{TestBroker, wait_until};

#[test]
fn expired_queued_messages_are_not_delivered_and_the_rest_carry_the_remaining_interval() {
    let broker = TestBroker::with_manual_clock("");
    let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "exp-sub", 300));
    sub.subscribe("exp", QoS::AtLeastOnce);
    sub.disconnect();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "exp-pub");
    let mut short = publish_packet("exp", b"short", QoS::AtLeastOnce, Some(1));
    short.properties.make_mut().message_expiry_interval = Some(1);
    let mut long = publish_packet("exp", b"long", QoS::AtLeastOnce, Some(2));
    long.properties.make_mut().message_expiry_interval = Some(100);
    publisher.publish(short);
    publisher.publish(long);
    publisher.publish_simple("exp", b"forever", QoS::AtLeastOnce);
    // The short one expires while the session is offline (the PUBACKs show they are queued).
    broker.advance(Duration::from_secs(2));
    let before = broker.metrics().messages_dropped;

    let (mut sub, connack) =
        RawClient::connect(broker.addr(), persistent_connect(V5, "exp-sub", 300));
    assert!(connack.session_present);
    let got = sub.expect_publish_acked();
    assert_eq!(got.payload(), b"long", "the expired message is skipped");
    let remaining = got
        .properties
        .message_expiry_interval
        .expect("expiry forwarded");
    assert_eq!(
        remaining, 98,
        "remaining interval decremented by the time queued"
    );
    let got = sub.expect_publish_acked();
    assert_eq!(got.payload(), b"forever");
    assert_eq!(got.properties.message_expiry_interval, None);
    assert!(
        broker.metrics().messages_dropped > before,
        "the expired message is counted"
    );
}

#[test]
fn expired_retained_message_is_not_sent_to_new_subscribers() {
    let broker = TestBroker::with_manual_clock("");
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "exp-ret-pub");
    let mut retained = publish_packet("exp/ret", b"old", QoS::AtLeastOnce, Some(1));
    retained.retain = true;
    retained.properties.make_mut().message_expiry_interval = Some(1);
    publisher.publish(retained);
    // Still there just before its expiry...
    broker.advance(Duration::from_millis(900));
    let mut early = RawClient::connected_clean(broker.addr(), V5, "exp-ret-early");
    early.subscribe("exp/ret", QoS::AtLeastOnce);
    assert_eq!(early.expect_publish_acked().payload(), b"old");
    // ...gone after it.
    broker.advance(Duration::from_millis(200));
    let mut sub = RawClient::connected_clean(broker.addr(), V5, "exp-ret-sub");
    sub.subscribe("exp/ret", QoS::AtLeastOnce);
    sub.ping();
    sub.expect_silence(crate::client::QUIET);
}

#[test]
fn session_is_gone_after_its_expiry_interval() {
    let broker = TestBroker::with_manual_clock("");
    let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "short-lived", 1));
    sub.subscribe("sess/t", QoS::AtLeastOnce);
    // The broker closes the socket once it handled the DISCONNECT: the expiry runs from here.
    sub.disconnect();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "sess-pub");
    // While the session lives, its subscription matches; once it expired, nothing does.
    assert_eq!(
        publisher.publish_simple("sess/t", b"kept", QoS::AtLeastOnce),
        ReasonCode::Success
    );
    broker.advance(Duration::from_millis(900));
    assert_eq!(
        publisher.publish_simple("sess/t", b"still", QoS::AtLeastOnce),
        ReasonCode::Success,
        "the session outlives most of its interval"
    );
    broker.advance(Duration::from_millis(200));
    wait_until("the session to expire", || {
        let reason = publisher.publish_simple("sess/t", b"probe", QoS::AtLeastOnce);
        (reason == ReasonCode::NoMatchingSubscribers).then_some(())
    });
    let (mut sub, connack) =
        RawClient::connect(broker.addr(), persistent_connect(V5, "short-lived", 1));
    assert!(!connack.session_present, "the session expired");
    sub.ping();
    sub.expect_silence(crate::client::QUIET);
}

#[test]
fn session_expiry_zero_ends_the_session_at_disconnect() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut sub = RawClient::connected_clean(broker.addr(), protocol, "gone-at-once");
        sub.subscribe("zero/t", QoS::AtLeastOnce);
        sub.disconnect();
        let mut publisher = RawClient::connected_clean(broker.addr(), V5, "zero-pub");
        wait_until("the session to end", || {
            let reason = publisher.publish_simple("zero/t", b"probe", QoS::AtLeastOnce);
            (reason == ReasonCode::NoMatchingSubscribers).then_some(())
        });
        let connect = connect_packet(protocol, "gone-at-once", false);
        let (client, connack) = RawClient::connect(broker.addr(), connect);
        assert!(!connack.session_present);
        client.disconnect();
    }
}

#[test]
fn disconnect_can_shorten_the_session_expiry() {
    let broker = TestBroker::start();
    let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "shorten", 600));
    sub.subscribe("shorten/t", QoS::AtLeastOnce);
    sub.send(&Packet::Disconnect(Disconnect {
        reason_code: ReasonCode::Success,
        properties: DisconnectProperties {
            session_expiry_interval: Some(0),
            ..DisconnectProperties::default()
        },
    }));
    sub.expect_closed();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "shorten-pub");
    wait_until("the session to end", || {
        let reason = publisher.publish_simple("shorten/t", b"probe", QoS::AtLeastOnce);
        (reason == ReasonCode::NoMatchingSubscribers).then_some(())
    });
}

#[test]
fn disconnect_setting_an_expiry_after_zero_is_a_protocol_error() {
    let broker = TestBroker::start();
    let mut client = RawClient::connected_clean(broker.addr(), V5, "sneaky");
    client.send(&Packet::Disconnect(Disconnect {
        reason_code: ReasonCode::Success,
        properties: DisconnectProperties {
            session_expiry_interval: Some(60),
            ..DisconnectProperties::default()
        },
    }));
    client.expect_disconnect(ReasonCode::ProtocolError);
}

#[test]
fn session_expiry_above_the_maximum_is_announced_in_connack() {
    let broker = TestBroker::with_config("[sessions]\nmax_session_expiry = 100\n");
    let (_client, connack) =
        RawClient::connect(broker.addr(), persistent_connect(V5, "capped", 1000));
    assert_eq!(connack.properties.session_expiry_interval, Some(100));
}
