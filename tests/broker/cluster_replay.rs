//! Replays (docs/cluster.md, "Replays after a NATS connection loss"): QoS 1/2 messages travel
//! under their own subject root, which a JetStream stream keeps for
//! `cluster.replay_window_ms`; a node that lost its NATS connection reads back what it missed
//! once it is connected again.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::Duration;

use codec::QoS;

use crate::client::{RawClient, V5, V311};
use crate::cluster::{
    PROBE, expect_no_message, next_message, start_node, start_node_with, until_routed,
};
use crate::harness::{TestBroker, wait_until, wait_until_within};
use crate::nats_cluster::NatsCluster;
use ::cluster::ClusterFigures;

/// A hang guard for JetStream settling after a server left or came back (a leader election
/// takes seconds), not a timing assertion.
const SETTLE_GUARD: Duration = Duration::from_secs(60);

/// [`wait_until_within`] [`SETTLE_GUARD`].
fn settle<T>(what: &str, done: impl FnMut() -> Option<T>) -> T {
    wait_until_within(SETTLE_GUARD, what, done)
}

/// Publishes QoS 1 probes on `node` until JetStream acknowledged one (the stream has a leader
/// among the servers still up); returns the figures then.
fn until_kept(publisher: &mut RawClient, node: &TestBroker) -> ClusterFigures {
    let before = node.cluster_figures().unwrap().reliable_stored;
    settle("JetStream keeps QoS 1 messages again", || {
        publisher.publish_simple("replay/probe", PROBE, QoS::AtLeastOnce);
        std::thread::sleep(Duration::from_millis(50));
        let now = node.cluster_figures()?;
        (now.reliable_stored > before).then_some(now)
    })
}

/// The subscriber's node loses its NATS server while the publisher's node goes on: the QoS 1
/// and 2 messages published meanwhile reach the subscriber once the node is connected again
/// (each once, in order, on both protocol versions); the QoS 0 one is not replayed, and the
/// messages it had received before the loss are not delivered again.
#[test]
fn messages_missed_while_a_node_lost_nats_are_replayed_once_it_is_back() {
    let mut nats = NatsCluster::start();
    // While JetStream elects a leader after the server stops, a PUBACK waits (publishes made
    // again) up to `ack_timeout_ms`: under the test client's 5 s wait for it.
    let source = start_node_with(&nats, 0, "ack_timeout_ms = 3000");
    let sink = start_node(&nats, 1);
    let mut v5 = RawClient::connected_clean(sink.addr(), V5, "replayed-5");
    v5.subscribe("replay/#", QoS::ExactlyOnce);
    let mut v311 = RawClient::connected_clean(sink.addr(), V311, "replayed-3");
    v311.subscribe("replay/+", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(source.addr(), V5, "replay-pub");
    until_routed(&mut publisher, "replay/p", &mut [&mut v5, &mut v311]);
    publisher.publish_simple("replay/before", b"b", QoS::AtLeastOnce);
    for client in [&mut v5, &mut v311] {
        assert_eq!(next_message(client).topic(), "replay/before");
    }

    nats.stop(1);
    wait_until("the sink's node lost NATS", || {
        (sink.cluster_figures()?.connected == 0).then_some(())
    });
    let kept = until_kept(&mut publisher, &source);
    let settled = |f: &ClusterFigures| f.reliable_stored + f.reliable_failures;
    // One topic: its messages keep their order across nodes (other topics' need not).
    for n in 0..4u8 {
        let qos = [QoS::AtLeastOnce, QoS::ExactlyOnce][usize::from(n % 2)];
        publisher.publish_simple("replay/missed", &[n], qos);
    }
    publisher.publish_simple("replay/qos0", b"m", QoS::AtMostOnce);
    let figures = settle("the four messages settled in JetStream", || {
        let now = source.cluster_figures()?;
        (settled(&now) >= settled(&kept) + 4).then_some(now)
    });
    assert_eq!(
        figures.reliable_stored,
        kept.reliable_stored + 4,
        "JetStream kept all four: {figures:?}"
    );

    nats.restart(1);
    // The restarted server may not answer JetStream requests at first: the node retries.
    settle("the sink's node replayed", || {
        (sink.cluster_figures()?.replays >= 1).then_some(())
    });
    for client in [&mut v5, &mut v311] {
        for n in 0..4u8 {
            let publish = next_message(client);
            assert_eq!(publish.topic(), "replay/missed");
            assert_eq!(publish.payload(), &[n]);
        }
        expect_no_message(client);
    }
    let figures = sink.cluster_figures().unwrap();
    assert!(figures.replayed >= 4, "{figures:?}");
}

/// A client's QoS 1/2 PUBLISH is acknowledged (PUBACK, PUBREC) only once JetStream has kept
/// the message for the other nodes: each acknowledgement finds its message counted as kept.
#[test]
fn a_publisher_is_acknowledged_once_jetstream_kept_the_message() {
    let nats = NatsCluster::start();
    let node = start_node(&nats, 0);
    let mut publisher = RawClient::connected_clean(node.addr(), V5, "kept-pub");
    let mut kept = until_kept(&mut publisher, &node).reliable_stored;
    for n in 0..20u8 {
        let qos = [QoS::AtLeastOnce, QoS::ExactlyOnce][usize::from(n % 2)];
        publisher.publish_simple("kept/t", &[n], qos);
        let figures = node.cluster_figures().unwrap();
        assert!(
            figures.reliable_stored > kept,
            "acknowledged before JetStream kept message {n}: {figures:?}"
        );
        kept = figures.reliable_stored;
    }
}
