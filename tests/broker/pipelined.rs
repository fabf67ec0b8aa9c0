//! Every packet of a connection takes effect in the order it was sent: a PUBLISH pipelined
//! behind the same client's SUBSCRIBE (without waiting for the SUBACK) is matched with the new
//! subscription, and one behind an UNSUBSCRIBE is not.

use bytes::BytesMut;
use codec::{Packet, QoS, ReasonCode, SubscriptionId, Unsubscribe};

use crate::client::{RawClient, V5, V311, pid, publish_packet, qos_options, s, subscribe_packet};
use crate::harness::TestBroker;

/// Tries per test: the fault this catches (the PUBLISH routed before the subscription reached
/// the routing shard's replica) showed in every try.
const TRIES: usize = 20;

/// Several shards, so a subscription change has to travel between them.
const SHARDS: &str = "[runtime]\nshards = 4\n";

fn encode_all(protocol: codec::ProtocolVersion, packets: &[Packet]) -> BytesMut {
    let mut out = BytesMut::new();
    for packet in packets {
        codec::encode(packet, protocol, &mut out).expect("test packet encodes");
    }
    out
}

fn subscribe_with_id(id: u16, filter: &str, subscription_id: u32) -> Packet {
    let mut subscribe = subscribe_packet(id, filter, qos_options(QoS::AtLeastOnce));
    subscribe.properties.subscription_identifier = SubscriptionId::new(subscription_id);
    Packet::Subscribe(subscribe)
}

#[test]
fn publish_pipelined_behind_subscribes_is_delivered_with_both_identifiers() {
    let broker = TestBroker::with_config(SHARDS);
    for n in 0..TRIES {
        let mut client = RawClient::connected_clean(broker.addr(), V5, &format!("pipe-{n}"));
        let topic = format!("pipe/{n}/x");
        let wire = encode_all(
            V5,
            &[
                subscribe_with_id(1, &format!("pipe/{n}/+"), 2),
                subscribe_with_id(2, &format!("pipe/{n}/#"), 3),
                Packet::Publish(publish_packet(&topic, b"hello", QoS::AtLeastOnce, Some(3))),
            ],
        );
        client.send_raw(&wire);
        let got = client.expect_publish_on(&topic);
        let mut ids: Vec<u32> = got
            .properties
            .subscription_identifiers
            .iter()
            .map(|id| id.get())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, [2, 3], "try {n}: one copy carrying both identifiers");
        client.recv_where("PUBACK", |p| match p {
            Packet::PubAck(ack) if ack.packet_id == pid(3) => Some(ack.reason_code),
            _ => None,
        });
    }
}

#[test]
fn publish_pipelined_behind_subscribe_is_delivered_on_3_1_1() {
    let broker = TestBroker::with_config(SHARDS);
    for n in 0..TRIES {
        let mut client = RawClient::connected_clean(broker.addr(), V311, &format!("pipe3-{n}"));
        let topic = format!("pipe3/{n}");
        let subscribe = subscribe_packet(1, &topic, qos_options(QoS::AtMostOnce));
        let publish = publish_packet(&topic, b"x", QoS::AtMostOnce, None);
        let wire = encode_all(
            V311,
            &[Packet::Subscribe(subscribe), Packet::Publish(publish)],
        );
        client.send_raw(&wire);
        client.expect_publish_on(&topic);
    }
}

#[test]
fn publish_pipelined_behind_unsubscribe_is_not_delivered() {
    let broker = TestBroker::with_config(SHARDS);
    for n in 0..TRIES {
        let mut client = RawClient::connected_clean(broker.addr(), V5, &format!("unpipe-{n}"));
        let topic = format!("unpipe/{n}");
        client.subscribe(&topic, QoS::AtMostOnce);
        let unsubscribe = Unsubscribe {
            packet_id: pid(9),
            filters: vec![s(&topic)],
            properties: Default::default(),
        };
        let wire = encode_all(
            V5,
            &[
                Packet::Unsubscribe(unsubscribe),
                Packet::Publish(publish_packet(&topic, b"late", QoS::AtLeastOnce, Some(10))),
            ],
        );
        client.send_raw(&wire);
        // The PUBACK comes after the UNSUBACK; a copy routed before the UNSUBSCRIBE took
        // effect would have been sent before the PUBACK.
        let reason = client.recv_where("PUBACK", |p| match p {
            Packet::Publish(publish) => panic!("try {n}: delivered after UNSUBSCRIBE: {publish:?}"),
            Packet::PubAck(ack) if ack.packet_id == pid(10) => Some(ack.reason_code),
            _ => None,
        });
        assert_eq!(reason, ReasonCode::NoMatchingSubscribers);
    }
}
