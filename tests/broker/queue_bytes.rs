//! Session queues bounded in bytes (issue 11): per session (`queues.max_queued_bytes`) and over
//! the whole broker (`queues.max_total_queued_bytes`), with the slow-consumer policy and the
//! drop counter of the message-count bound.

use std::num::NonZeroU16;

use codec::{Packet, QoS, ReasonCode};

use crate::client::{RawClient, V5, V311, connect_packet};
use crate::harness::TestBroker;

/// Payload bytes of each test message: with its 4-byte topic, two fit in 10,240 bytes.
const PAYLOAD: usize = 4000;

/// Publishes `count` QoS 1 messages of [`PAYLOAD`] bytes on "slow", the first byte numbering
/// them.
fn publish_large(broker: &TestBroker, count: u8) -> RawClient {
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "large-numbers");
    for i in 0..count {
        let mut payload = vec![0u8; PAYLOAD];
        payload[0] = i;
        publisher.publish_simple("slow", &payload, QoS::AtLeastOnce);
    }
    publisher
}

/// A persistent 3.1.1 session subscribed to "slow", left offline.
fn offline_session(broker: &TestBroker, id: &str) -> codec::Connect {
    let connect = connect_packet(V311, id, false);
    let mut sub = RawClient::connected(broker.addr(), connect.clone());
    sub.subscribe("slow", QoS::AtLeastOnce);
    sub.disconnect();
    connect
}

#[test]
fn offline_queue_byte_bound_drops_the_oldest() {
    let broker = TestBroker::with_config("[queues]\nmax_queued_bytes = 10240\n");
    let connect = offline_session(&broker, "bytes-offline");
    let dropped_before = broker.metrics().messages_dropped;
    publish_large(&broker, 6);
    broker.wait_for_metrics("4 drops", |m| m.messages_dropped - dropped_before >= 4);
    let (mut sub, connack) = RawClient::connect(broker.addr(), connect);
    assert!(connack.session_present);
    let got: Vec<u8> = sub
        .drain_publishes(true)
        .iter()
        .map(|p| p.payload()[0])
        .collect();
    assert_eq!(got, [4, 5], "the newest that fit in 10,240 bytes");
    assert_eq!(broker.metrics().messages_dropped - dropped_before, 4);
}

#[test]
fn the_broker_wide_queued_bytes_budget_bounds_all_sessions_together() {
    let broker = TestBroker::with_config("[queues]\nmax_total_queued_bytes = 10240\n");
    let connects: Vec<_> = ["bytes-a", "bytes-b", "bytes-c"]
        .into_iter()
        .map(|id| offline_session(&broker, id))
        .collect();
    let dropped_before = broker.metrics().messages_dropped;
    publish_large(&broker, 5);
    // 15 copies, at most two fit in the budget at any time: 13 dropped.
    broker.wait_for_metrics("13 drops", |m| m.messages_dropped - dropped_before >= 13);
    assert_eq!(reconnect_and_count(&broker, &connects), 2);
    assert_eq!(broker.metrics().messages_dropped - dropped_before, 13);
    // Sent, they left the queues and their bytes the budget: two new copies fit again.
    publish_large(&broker, 1);
    broker.wait_for_metrics("1 more drop", |m| m.messages_dropped - dropped_before >= 14);
    assert_eq!(reconnect_and_count(&broker, &connects), 2);
}

/// Reconnects each session, takes (and acknowledges) what it had queued, disconnects it again;
/// returns how many messages they had in all.
fn reconnect_and_count(broker: &TestBroker, connects: &[codec::Connect]) -> usize {
    connects
        .iter()
        .map(|connect| {
            let mut sub = RawClient::connected(broker.addr(), connect.clone());
            let got = sub.drain_publishes(true).len();
            sub.disconnect();
            got
        })
        .sum()
}

#[test]
fn queued_bytes_bound_with_disconnect_policy_closes_the_slow_consumer() {
    let broker = TestBroker::with_config(
        "[queues]\nmax_queued_bytes = 10240\nslow_consumer_policy = \"disconnect\"\n",
    );
    let mut connect = connect_packet(V5, "bytes-kicked", true);
    connect.properties.receive_maximum = NonZeroU16::new(1);
    let mut sub = RawClient::connected(broker.addr(), connect);
    sub.subscribe("slow", QoS::AtLeastOnce);
    // One in flight and two queued fit in 10,240 bytes; the fourth does not.
    publish_large(&broker, 4);
    match sub.expect_closed().as_slice() {
        [Packet::Publish(first), Packet::Disconnect(d)] => {
            assert_eq!(first.payload()[0], 0);
            assert_eq!(d.reason_code, ReasonCode::QuotaExceeded);
        }
        other => panic!("expected PUBLISH 0 then DISCONNECT 0x97, got {other:?}"),
    }
}
