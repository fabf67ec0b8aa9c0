//! A journaled QoS 2 delivery while JetStream cannot keep its step (docs/cluster.md, "Exactly
//! once across a node's death"): by default it waits until the step is kept, so that the
//! message cannot reach its client twice after the node's death; with
//! `cluster.qos2_journal_wait_ms` it leaves unjournaled once that wait is over (counted).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::Duration;

use codec::{Packet, QoS};

use crate::client::{Event, RawClient, V5, persistent_connect, publish_packet};
use crate::cluster::start_node_with;
use crate::harness::{TestBroker, wait_until_within};
use crate::nats_cluster::NatsCluster;

/// How long the node's NATS server is frozen: beyond `ack_timeout_ms` (1,500) and the bounded
/// wait of the second test (1,000).
const STALL: Duration = Duration::from_secs(4);

/// The node's only NATS server frozen (SIGSTOP) for 4 s: a QoS 2 message published on the
/// node reaches its persistent QoS 2 subscriber there only after the server resumes, and no
/// journal write was given up.
#[test]
fn a_journaled_qos_2_delivery_waits_until_jetstream_keeps_its_step() {
    let (nats, node, mut subscriber, mut publisher) = stalled_delivery_setup("");
    nats.pause(0);
    publisher.send(&Packet::Publish(publish_packet(
        "jw/t",
        b"held",
        QoS::ExactlyOnce,
        Some(7),
    )));
    match subscriber.next_event(STALL - Duration::from_millis(500)) {
        Event::Timeout => {}
        other => panic!("delivered while JetStream could not journal it: {other:?}"),
    }
    nats.resume(0);
    let publish = received(&mut subscriber, Duration::from_secs(30));
    assert_eq!(publish.payload(), b"held");
    assert_eq!(node.cluster_figures().unwrap().journal_failures, 0);
}

/// The same with `qos2_journal_wait_ms = 1000`: the message reaches the subscriber while the
/// server is still frozen, its step counted as not journaled.
#[test]
fn a_bounded_journal_wait_lets_a_qos_2_delivery_leave_unjournaled() {
    let (nats, node, mut subscriber, mut publisher) =
        stalled_delivery_setup("qos2_journal_wait_ms = 1000");
    nats.pause(0);
    publisher.send(&Packet::Publish(publish_packet(
        "jw/t",
        b"unjournaled",
        QoS::ExactlyOnce,
        Some(7),
    )));
    let publish = received(&mut subscriber, STALL - Duration::from_millis(500));
    nats.resume(0);
    assert_eq!(publish.payload(), b"unjournaled");
    wait_until_within(Duration::from_secs(30), "the step counted", || {
        (node.cluster_figures()?.journal_failures >= 1).then_some(())
    });
}

/// Node 0 (`ack_timeout_ms = 1500`, `extra`) alone on NATS server 0; a persistent 5.0
/// subscriber to `jw/#` at QoS 2 and a publisher there, once a first QoS 2 delivery was
/// journaled.
fn stalled_delivery_setup(extra: &str) -> (NatsCluster, TestBroker, RawClient, RawClient) {
    let nats = NatsCluster::start();
    let node = start_node_with(&nats, 0, &format!("ack_timeout_ms = 1500\n{extra}"));
    let mut subscriber = RawClient::connected(node.addr(), persistent_connect(V5, "jw-sub", 300));
    subscriber.subscribe("jw/#", QoS::ExactlyOnce);
    let mut publisher = RawClient::connected_clean(node.addr(), V5, "jw-pub");
    wait_until_within(
        Duration::from_secs(60),
        "a QoS 2 delivery journaled",
        || {
            publisher.publish_simple("jw/first", b"first", QoS::ExactlyOnce);
            let publish = received(&mut subscriber, Duration::from_secs(15));
            assert_eq!(publish.payload(), b"first");
            (node.cluster_figures()?.journal_writes > 0).then_some(())
        },
    );
    (nats, node, subscriber, publisher)
}

/// The next PUBLISH within `within` (acknowledged), other packets skipped.
fn received(client: &mut RawClient, within: Duration) -> codec::Publish {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match client.next_event(left) {
            Event::Packet(packet) => {
                if let Packet::Publish(publish) = *packet {
                    client.acknowledge(&publish);
                    return publish;
                }
            }
            other => panic!("no PUBLISH within {within:?}: {other:?}"),
        }
    }
}
