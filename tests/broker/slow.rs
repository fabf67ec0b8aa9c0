//! Slow consumers: QoS 0 beyond the connection's byte bound is dropped and counted while the
//! publisher keeps going; QoS 1 beyond the session queue bound drops the oldest or disconnects.

use std::num::NonZeroU16;

use codec::{QoS, ReasonCode};

use crate::client::{QUIET, RawClient, V5, V311, connect_packet};
use crate::harness::{TestBroker, wait_until};

#[test]
fn qos0_to_a_consumer_that_never_reads_is_dropped_and_counted() {
    let broker = TestBroker::with_config("[queues]\noutbound_bytes = 1024\n");
    let mut stalled = RawClient::connected_clean(broker.addr(), V311, "stalled");
    stalled.subscribe("flood", QoS::AtMostOnce);
    let mut bystander = RawClient::connected_clean(broker.addr(), V5, "bystander");
    bystander.subscribe("other", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "flooder");
    let payload = vec![b'z'; 4096];
    // Publish in batches until the socket buffers towards the stalled reader are full and the
    // broker starts dropping (the publisher's PUBACKs keep coming all along).
    wait_until("QoS 0 drops", || {
        for _ in 0..200 {
            let reason = publisher.publish_simple("flood", &payload, QoS::AtLeastOnce);
            assert_eq!(reason, ReasonCode::Success);
        }
        (broker.metrics().messages_dropped > 0).then_some(())
    });
    // Neither the publisher nor another subscriber is stalled.
    publisher.publish_simple("other", b"still here", QoS::AtLeastOnce);
    assert_eq!(bystander.expect_publish_acked().payload(), b"still here");
    publisher.ping();
}

/// A subscriber whose Receive Maximum is 1, subscribed to "slow" with QoS 1.
fn slow_subscriber(broker: &TestBroker, id: &str) -> RawClient {
    let mut connect = connect_packet(V5, id, true);
    connect.properties.receive_maximum = NonZeroU16::new(1);
    let mut client = RawClient::connected(broker.addr(), connect);
    client.subscribe("slow", QoS::AtLeastOnce);
    client
}

fn publish_numbered(broker: &TestBroker, count: u8) -> RawClient {
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "numbers");
    for i in 0..count {
        publisher.publish_simple("slow", &[i], QoS::AtLeastOnce);
    }
    publisher
}

#[test]
fn qos1_queue_bound_drops_the_oldest_for_an_online_slow_consumer() {
    let broker = TestBroker::with_config(
        "[queues]\nmax_queued_messages = 5\nslow_consumer_policy = \"drop-oldest\"\n",
    );
    let mut sub = slow_subscriber(&broker, "slow-online");
    let dropped_before = broker.metrics().messages_dropped;
    let mut publisher = publish_numbered(&broker, 20);
    // 0 is in flight; the queue keeps the newest five (15..=19); 1..=14 are dropped. Nothing is
    // acknowledged until every copy reached the subscriber's session (they may cross shards).
    let first = sub.expect_publish();
    assert_eq!(first.payload()[..], [0]);
    broker.wait_for_metrics("14 drops", |m| m.messages_dropped - dropped_before >= 14);
    sub.acknowledge(&first);
    let rest: Vec<u8> = (0..5)
        .map(|_| sub.expect_publish_acked().payload()[0])
        .collect();
    assert_eq!(rest, [15, 16, 17, 18, 19]);
    sub.ping();
    sub.expect_silence(QUIET);
    assert_eq!(broker.metrics().messages_dropped - dropped_before, 14);
    publisher.ping();
}

#[test]
fn qos1_queue_bound_drops_the_oldest_for_an_offline_session() {
    let broker = TestBroker::with_config("[queues]\nmax_queued_messages = 5\n");
    let connect = connect_packet(V311, "slow-offline", false);
    let mut sub = RawClient::connected(broker.addr(), connect.clone());
    sub.subscribe("slow", QoS::AtLeastOnce);
    sub.disconnect();
    let dropped_before = broker.metrics().messages_dropped;
    publish_numbered(&broker, 20);
    broker.wait_for_metrics("15 drops", |m| m.messages_dropped - dropped_before >= 15);
    let (mut sub, connack) = RawClient::connect(broker.addr(), connect);
    assert!(connack.session_present);
    let got: Vec<u8> = (0..5)
        .map(|_| sub.expect_publish_acked().payload()[0])
        .collect();
    assert_eq!(got, [15, 16, 17, 18, 19]);
    sub.ping();
    sub.expect_silence(QUIET);
}

#[test]
fn qos1_queue_bound_with_disconnect_policy_closes_the_slow_consumer() {
    let broker = TestBroker::with_config(
        "[queues]\nmax_queued_messages = 5\nslow_consumer_policy = \"disconnect\"\n",
    );
    let mut sub = slow_subscriber(&broker, "slow-kicked");
    let mut publisher = publish_numbered(&broker, 7);
    // One in flight and five queued fit; the seventh does not.
    let before = sub.expect_closed();
    match before.as_slice() {
        [codec::Packet::Publish(first), codec::Packet::Disconnect(d)] => {
            assert_eq!(first.payload()[..], [0]);
            assert_eq!(d.reason_code, ReasonCode::QuotaExceeded);
        }
        other => panic!("expected PUBLISH 0 then DISCONNECT 0x97, got {other:?}"),
    }
    // The publisher is unaffected.
    assert_eq!(
        publisher.publish_simple("elsewhere", b"x", QoS::AtLeastOnce),
        ReasonCode::NoMatchingSubscribers
    );
}
