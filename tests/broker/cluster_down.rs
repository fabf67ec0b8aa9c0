//! While a node is cut off from NATS its QoS 1/2 publishers are acknowledged only once
//! JetStream keeps their messages (docs/cluster.md, "Guarantees"): the acknowledgement waits
//! for NATS to come back, and is refused past `cluster.ack_timeout_ms` (5.0: 0x80; 3.1.1: the
//! connection closed). `cluster.ack_while_disconnected = true` brings back the acknowledgement
//! from the node's memory (`cluster::with_nats_down_...`).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::Duration;

use codec::{Packet, QoS, ReasonCode};

use crate::client::{Event, RawClient, V5, V311, publish_packet};
use crate::cluster::{next_message, start_node, start_node_with, until_routed};
use crate::cluster_acks::until_kept;
use crate::harness::{wait_until, wait_until_within};
use crate::nats_cluster::NatsCluster;

/// A hang guard for the NATS servers and JetStream coming back, not a timing assertion.
const BACK_GUARD: Duration = Duration::from_secs(60);

/// NATS stopped under a node: a QoS 1 publish gets no PUBACK while NATS is down (its local
/// subscriber is served at once), and gets Success once NATS is back and JetStream kept the
/// message, which then reaches the subscriber on another node.
#[test]
fn with_nats_down_a_publish_is_acknowledged_once_jetstream_keeps_it() {
    let mut nats = NatsCluster::start();
    let node = start_node_with(&nats, 0, "ack_timeout_ms = 60000");
    let remote = start_node(&nats, 1);
    let mut local = RawClient::connected_clean(node.addr(), V5, "down-local");
    local.subscribe("down/#", QoS::AtLeastOnce);
    let mut far = RawClient::connected_clean(remote.addr(), V5, "down-far");
    far.subscribe("down/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(node.addr(), V5, "down-pub");
    until_routed(&mut publisher, "down/p", &mut [&mut local, &mut far]);
    let kept_before = until_kept(&mut publisher, &node).reliable_stored;
    nats.stop_all();
    wait_until("the node disconnected from NATS", || {
        (node.cluster_figures()?.connected == 0).then_some(())
    });

    let id = publisher.next_packet_id();
    let publish = publish_packet("down/kept", b"k", QoS::AtLeastOnce, Some(id));
    publisher.send(&Packet::Publish(publish));
    assert_eq!(next_message(&mut local).topic(), "down/kept");
    match publisher.next_event(Duration::from_secs(1)) {
        Event::Timeout => {}
        other => panic!("acknowledged or closed while NATS is down: {other:?}"),
    }
    nats.restart_all();
    let ack = wait_until_within(
        BACK_GUARD,
        "the PUBACK once NATS is back",
        || match publisher.next_event(Duration::from_millis(200)) {
            Event::Packet(packet) => match *packet {
                Packet::PubAck(ack) => Some(ack),
                _ => None,
            },
            Event::Closed => panic!("the publisher was disconnected"),
            Event::Timeout => None,
        },
    );
    assert_eq!(
        (ack.packet_id.get(), ack.reason_code),
        (id, ReasonCode::Success)
    );
    let kept = node.cluster_figures().unwrap().reliable_stored;
    assert!(kept > kept_before, "Success before JetStream kept it");
    let received = wait_until_within(BACK_GUARD, "the message on the other node", || {
        match far.next_event(Duration::from_millis(200)) {
            Event::Packet(packet) => match *packet {
                Packet::Publish(publish) => {
                    far.acknowledge(&publish);
                    (publish.topic() == "down/kept").then_some(publish)
                }
                _ => None,
            },
            _ => None,
        }
    });
    assert_eq!(received.payload(), b"k");
}

/// NATS stopped under a node for longer than `cluster.ack_timeout_ms`: a 5.0 publisher's QoS 1
/// and 2 messages are refused with 0x80, never acknowledged with Success, and a 3.1.1
/// publisher's connection is closed without its PUBACK; local subscribers are still served.
#[test]
fn with_nats_down_past_the_ack_timeout_publishes_are_refused() {
    let mut nats = NatsCluster::start();
    let node = start_node_with(&nats, 0, "ack_timeout_ms = 1500");
    let mut local = RawClient::connected_clean(node.addr(), V5, "refuse-local");
    local.subscribe("refuse/#", QoS::AtLeastOnce);
    let mut v5 = RawClient::connected_clean(node.addr(), V5, "refuse-5");
    let mut v311 = RawClient::connected_clean(node.addr(), V311, "refuse-3");
    until_kept(&mut v5, &node);
    nats.stop_all();
    wait_until("the node disconnected from NATS", || {
        (node.cluster_figures()?.connected == 0).then_some(())
    });
    let refused =
        [QoS::AtLeastOnce, QoS::ExactlyOnce].map(|qos| v5.publish_simple("refuse/5", b"r", qos));
    assert_eq!(refused, [ReasonCode::UnspecifiedError; 2]);
    let id = v311.next_packet_id();
    let publish = publish_packet("refuse/3", b"r", QoS::AtLeastOnce, Some(id));
    v311.send(&Packet::Publish(publish));
    let before_close = v311.expect_closed();
    assert!(
        !before_close.iter().any(|p| matches!(p, Packet::PubAck(_))),
        "a 3.1.1 PUBACK for a message not kept: {before_close:?}"
    );
    let topics: Vec<String> = (0..3)
        .map(|_| next_message(&mut local).topic().to_owned())
        .collect();
    assert_eq!(
        topics,
        ["refuse/5", "refuse/5", "refuse/3"],
        "served locally"
    );
    assert!(node.cluster_figures().unwrap().acks_refused >= 3);
}
