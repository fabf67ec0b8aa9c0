//! SUBSCRIBE and UNSUBSCRIBE: when a subscription takes effect, overlapping subscriptions,
//! subscription identifiers and no-local.

use codec::{QoS, ReasonCode};

use crate::client::{RawClient, V5, V311};
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
                .map(|_| subscriber.expect_publish_on(&topic).payload)
                .collect();
            got.sort();
            assert_eq!(got, [&b"other"[..]; 4].iter().chain([&&b"own"[..]]).copied().collect::<Vec<_>>(), "round {round}");
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
