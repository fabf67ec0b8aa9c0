//! Wills: published on an abnormal end (socket closed, keep-alive, takeover, DISCONNECT 0x04),
//! not on a normal DISCONNECT; a delayed will is cancelled by a reconnect.

use std::time::Duration;

use bytes::Bytes;
use codec::{Connect, QoS, ReasonCode, Will, WillProperties};

use crate::client::{QUIET, RawClient, V5, V311, connect_packet, s};
use crate::harness::TestBroker;

/// A CONNECT with a QoS 1 will on `topic`.
pub(crate) fn with_will(protocol: codec::ProtocolVersion, id: &str, topic: &str) -> Connect {
    let mut connect = connect_packet(protocol, id, true);
    connect.will = Some(Will {
        topic: s(topic),
        payload: Bytes::from_static(b"gone"),
        qos: QoS::AtLeastOnce,
        retain: false,
        properties: WillProperties::default(),
    });
    connect
}

/// A watcher subscribed to `topic`.
fn watcher(broker: &TestBroker, protocol: codec::ProtocolVersion, topic: &str) -> RawClient {
    let mut client = RawClient::connected_clean(broker.addr(), protocol, "will-watcher");
    client.subscribe(topic, QoS::AtLeastOnce);
    client
}

/// Makes sure the broker handled the end of `id`'s previous connection (a new connection with
/// the same id and clean start is accepted only after the old session is dealt with), then checks
/// that no will reached the watcher.
fn assert_no_will(
    broker: &TestBroker,
    watcher: &mut RawClient,
    protocol: codec::ProtocolVersion,
    id: &str,
) {
    RawClient::connected_clean(broker.addr(), protocol, id).disconnect();
    watcher.ping();
    watcher.expect_silence(QUIET);
}

#[test]
fn will_is_published_when_the_socket_closes_without_disconnect() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut watch = watcher(&broker, protocol, "will/abrupt");
        let client =
            RawClient::connected(broker.addr(), with_will(protocol, "dying", "will/abrupt"));
        client.drop_abruptly();
        let will = watch.expect_publish_acked();
        assert_eq!(will.topic(), "will/abrupt");
        assert_eq!(will.payload(), b"gone");
        assert_eq!(will.qos, QoS::AtLeastOnce);
        watch.disconnect();
    }
}

#[test]
fn will_is_not_published_after_a_normal_disconnect() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut watch = watcher(&broker, protocol, "will/normal");
        let client =
            RawClient::connected(broker.addr(), with_will(protocol, "polite", "will/normal"));
        client.disconnect();
        assert_no_will(&broker, &mut watch, protocol, "polite");
        watch.disconnect();
    }
}

#[test]
fn will_is_published_after_disconnect_with_will_message() {
    let broker = TestBroker::start();
    let mut watch = watcher(&broker, V5, "will/0x04");
    let client = RawClient::connected(broker.addr(), with_will(V5, "leaver", "will/0x04"));
    client.disconnect_with(ReasonCode::DisconnectWithWillMessage);
    assert_eq!(watch.expect_publish_acked().payload(), b"gone");
}

#[test]
fn will_is_published_when_the_session_is_taken_over() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut watch = watcher(&broker, protocol, "will/takeover");
        let mut old =
            RawClient::connected(broker.addr(), with_will(protocol, "twin", "will/takeover"));
        let mut new = RawClient::connected_clean(broker.addr(), protocol, "twin");
        old.expect_disconnect(ReasonCode::SessionTakenOver);
        assert_eq!(watch.expect_publish_acked().payload(), b"gone");
        new.ping();
        watch.disconnect();
    }
}

#[test]
fn retained_will_is_kept() {
    let broker = TestBroker::start();
    let mut connect = with_will(V5, "ret-will", "will/retained");
    connect.will.as_mut().expect("has a will").retain = true;
    RawClient::connected(broker.addr(), connect).drop_abruptly();
    let mut watch = RawClient::connected_clean(broker.addr(), V5, "late");
    crate::harness::wait_until("the retained will", || {
        watch.subscribe("will/retained", QoS::AtLeastOnce);
        watch.ping();
        match watch.next_event(Duration::ZERO) {
            crate::client::Event::Packet(p) => Some(p),
            _ => None,
        }
    });
}

/// A 5.0 CONNECT with a will delayed by `delay` seconds and a session kept for `expiry` seconds.
fn delayed(id: &str, delay: u32, expiry: u32) -> Connect {
    let mut connect = with_will(V5, id, "will/delayed");
    connect.clean_start = false;
    connect.properties.session_expiry_interval = Some(expiry);
    connect
        .will
        .as_mut()
        .expect("has a will")
        .properties
        .will_delay_interval = Some(delay);
    connect
}

/// Waits until the broker handled the end of every connection but the watcher's (the delays
/// run from there).
fn wait_for_only_the_watcher(broker: &TestBroker) {
    broker.wait_for_metrics("the close", |m| m.clients_connected == 1);
}

#[test]
fn delayed_will_is_published_after_its_delay() {
    let broker = TestBroker::with_manual_clock("");
    let mut watch = watcher(&broker, V5, "will/delayed");
    RawClient::connected(broker.addr(), delayed("slow-will", 1, 60)).drop_abruptly();
    wait_for_only_the_watcher(&broker);
    // Not before the delay...
    broker.advance(Duration::from_millis(900));
    watch.ping();
    watch.expect_silence(QUIET);
    // ...then at once.
    broker.advance(Duration::from_millis(200));
    assert_eq!(watch.expect_publish_acked().payload(), b"gone");
}

#[test]
fn delayed_will_is_cancelled_by_a_reconnect() {
    let broker = TestBroker::with_manual_clock("");
    let mut watch = watcher(&broker, V5, "will/delayed");
    RawClient::connected(broker.addr(), delayed("back-soon", 1, 60)).drop_abruptly();
    wait_for_only_the_watcher(&broker);
    let (mut back, connack) = RawClient::connect(broker.addr(), delayed("back-soon", 1, 60));
    assert!(connack.session_present);
    back.ping();
    // Well past the delay: no will.
    broker.advance(Duration::from_secs(2));
    back.ping();
    watch.ping();
    watch.expect_silence(QUIET);
    back.disconnect();
}

#[test]
fn will_delay_longer_than_the_session_goes_out_when_the_session_ends() {
    let broker = TestBroker::with_manual_clock("");
    let mut watch = watcher(&broker, V5, "will/delayed");
    RawClient::connected(broker.addr(), delayed("short-session", 600, 1)).drop_abruptly();
    wait_for_only_the_watcher(&broker);
    broker.advance(Duration::from_millis(900));
    watch.ping();
    watch.expect_silence(QUIET);
    broker.advance(Duration::from_millis(200));
    assert_eq!(watch.expect_publish_acked().payload(), b"gone");
}

#[test]
fn will_properties_are_forwarded() {
    let broker = TestBroker::start();
    let mut watch = watcher(&broker, V5, "will/props");
    let mut connect = with_will(V5, "props", "will/props");
    let will = connect.will.as_mut().expect("has a will");
    will.properties.content_type = Some(s("text/plain"));
    will.properties.response_topic = Some(s("reply/here"));
    will.properties.correlation_data = Some(Bytes::from_static(b"corr"));
    will.properties.user_properties = vec![(s("k"), s("v"))];
    RawClient::connected(broker.addr(), connect).drop_abruptly();
    let got = watch.expect_publish_acked();
    let app = &got.properties.application;
    assert_eq!(app.content_type(), Some(s("text/plain")));
    assert_eq!(app.response_topic(), Some(s("reply/here")));
    assert_eq!(app.correlation_data().as_deref(), Some(&b"corr"[..]));
    let users: Vec<_> = app.user_properties().collect();
    assert_eq!(users, vec![(s("k"), s("v"))]);
}
