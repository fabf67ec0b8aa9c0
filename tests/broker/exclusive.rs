//! Exclusive subscriptions (`routing.exclusive_subscriptions`, issue 49): one session at a time
//! holds `$exclusive/<filter>`, the next SUBSCRIBE gets 0x97 (3.1.1: 0x80) until the holder
//! unsubscribes or its session ends; the holder gets what `<filter>` matches; the hold
//! survives a restart with the stored session; off, the text is an ordinary filter.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use codec::{ProtocolVersion, QoS, ReasonCode};

use crate::client::{RawClient, persistent_connect, qos_options, subscribe_packet};
use crate::harness::TestBroker;

const ON: &str = "[routing]\nexclusive_subscriptions = true\n";
const FILTER: &str = "$exclusive/plant/+/valve";

/// SUBSCRIBE to `filter` at QoS 1: the one reason code of its SUBACK.
fn subscribe(client: &mut RawClient, filter: &str) -> ReasonCode {
    let id = client.next_packet_id();
    let ack = client.subscribe_with(subscribe_packet(id, filter, qos_options(QoS::AtLeastOnce)));
    ack.reason_codes[0]
}

#[test]
fn one_session_holds_an_exclusive_filter_until_it_lets_go() {
    let broker = TestBroker::with_config(ON);
    let v5 = ProtocolVersion::V5;
    let mut first = RawClient::connected_clean(broker.addr(), v5, "first");
    let mut second = RawClient::connected_clean(broker.addr(), v5, "second");
    let mut old = RawClient::connected_clean(broker.addr(), ProtocolVersion::V3_1_1, "old");
    assert_eq!(subscribe(&mut first, FILTER), ReasonCode::GrantedQoS1);
    assert_eq!(
        subscribe(&mut first, FILTER),
        ReasonCode::GrantedQoS1,
        "again: still its"
    );
    assert_eq!(subscribe(&mut second, FILTER), ReasonCode::QuotaExceeded);
    assert_eq!(
        subscribe(&mut old, FILTER),
        ReasonCode::UnspecifiedError,
        "3.1.1: 0x80"
    );

    let mut publisher = RawClient::connected_clean(broker.addr(), v5, "pub");
    publisher.publish_simple("plant/7/valve", b"open", QoS::AtLeastOnce);
    let got = first.expect_publish_acked();
    assert_eq!(
        (got.topic(), got.payload()),
        ("plant/7/valve", &b"open"[..])
    );

    first.unsubscribe(FILTER);
    assert_eq!(subscribe(&mut second, FILTER), ReasonCode::GrantedQoS1);
    second.disconnect();
    // A clean session ends with its connection: its hold goes with it.
    let mut third = RawClient::connected_clean(broker.addr(), v5, "third");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while subscribe(&mut third, FILTER) != ReasonCode::GrantedQoS1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the ended session kept its hold"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_shared_exclusive_filter_is_invalid_and_off_it_is_an_ordinary_filter() {
    let broker = TestBroker::with_config(ON);
    let mut client = RawClient::connected_clean(broker.addr(), ProtocolVersion::V5, "c");
    let shared = subscribe(&mut client, "$exclusive/$share/g/a");
    assert_eq!(shared, ReasonCode::TopicFilterInvalid);

    let off = TestBroker::start();
    let v5 = ProtocolVersion::V5;
    let mut one = RawClient::connected_clean(off.addr(), v5, "one");
    let mut two = RawClient::connected_clean(off.addr(), v5, "two");
    assert_eq!(subscribe(&mut one, FILTER), ReasonCode::GrantedQoS1);
    assert_eq!(subscribe(&mut two, FILTER), ReasonCode::GrantedQoS1);
    let mut publisher = RawClient::connected_clean(off.addr(), v5, "pub");
    publisher.publish_simple("plant/7/valve", b"x", QoS::AtLeastOnce);
    one.expect_silence(std::time::Duration::from_millis(200));
}

#[test]
fn the_hold_of_a_stored_session_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{ON}{}",
        crate::persistence::store_config("log", dir.path())
    );
    let v5 = ProtocolVersion::V5;
    {
        let broker = TestBroker::with_store(&config);
        let mut holder = RawClient::connected(broker.addr(), persistent_connect(v5, "holder", 600));
        assert_eq!(subscribe(&mut holder, FILTER), ReasonCode::GrantedQoS1);
        holder.disconnect();
    }
    let broker = TestBroker::with_store(&config);
    let mut other = RawClient::connected_clean(broker.addr(), v5, "other");
    assert_eq!(subscribe(&mut other, FILTER), ReasonCode::QuotaExceeded);
    let mut publisher = RawClient::connected_clean(broker.addr(), v5, "pub");
    publisher.publish_simple("plant/1/valve", b"queued", QoS::AtLeastOnce);
    let mut holder = RawClient::connected(broker.addr(), persistent_connect(v5, "holder", 600));
    assert_eq!(holder.expect_publish_acked().topic(), "plant/1/valve");
}
