//! SUBSCRIBE and UNSUBSCRIBE: when a subscription takes effect, overlapping subscriptions,
//! subscription identifiers and no-local.

use codec::{QoS, ReasonCode};

use crate::client::{RawClient, V5, V311};
use crate::harness::TestBroker;

#[test]
fn publish_right_after_suback_is_delivered() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut subscriber = RawClient::connected_clean(broker.addr(), protocol, "fast-sub");
        let mut publisher = RawClient::connected_clean(broker.addr(), protocol, "fast-pub");
        for round in 0..30 {
            let topic = format!("fast/{round}");
            subscriber.subscribe(&topic, QoS::AtMostOnce);
            subscriber.publish_simple(&topic, b"own", QoS::AtMostOnce);
            publisher.publish_simple(&topic, b"other", QoS::AtMostOnce);
            let mut got = vec![
                subscriber.expect_publish_on(&topic).payload,
                subscriber.expect_publish_on(&topic).payload,
            ];
            got.sort();
            assert_eq!(got, [&b"other"[..], &b"own"[..]], "round {round}");
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
