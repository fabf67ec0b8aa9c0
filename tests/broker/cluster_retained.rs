//! Retained messages cluster-wide (docs/cluster.md, "Retained messages"): a retained message
//! published on any node is served by every node, including one started later; an overwrite
//! or a clear reaches every node; racing publishes on three nodes end the same everywhere.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::{Duration, Instant};

use codec::QoS;

use crate::client::{ProtocolVersion, RawClient, V5, V311, publish_packet};
use crate::cluster::{CONVERGENCE_GUARD, start_cluster, start_node};
use crate::harness::{TestBroker, wait_until_within};
use crate::nats_cluster::NatsCluster;

/// What a new subscriber to `filter` on `node` receives as retained: (topic, payload, expiry).
///
/// The subscriber lets the broker assign its client id, so looking takes no owner record in
/// the cluster's bucket. Live copies of messages still on their way from other nodes may
/// reach it too: they come without RETAIN (Retain As Published is off) and are not counted.
fn retained_on(node: &TestBroker, filter: &str) -> Vec<(String, Vec<u8>, Option<u32>)> {
    let mut client = RawClient::connected_clean(node.addr(), V5, "");
    client.subscribe(filter, QoS::AtLeastOnce);
    let mut got: Vec<_> = client
        .drain_publishes(true)
        .into_iter()
        .filter(|publish| publish.retain)
        .map(|publish| {
            let expiry = publish.properties.message_expiry_interval;
            (
                publish.topic().to_owned(),
                publish.payload().to_vec(),
                expiry,
            )
        })
        .collect();
    client.disconnect();
    got.sort();
    got
}

/// Publishes a retained `payload` on `topic` at QoS 1 from a new client on `node` (its client
/// id assigned by the broker, so no owner record is taken).
fn publish_retained(
    node: &TestBroker,
    protocol: ProtocolVersion,
    topic: &str,
    payload: &[u8],
    expiry: Option<u32>,
) {
    let mut client = RawClient::connected_clean(node.addr(), protocol, "");
    let mut publish = publish_packet(topic, payload, QoS::AtLeastOnce, Some(1));
    publish.retain = true;
    if expiry.is_some() {
        publish.properties.make_mut().message_expiry_interval = expiry;
    }
    assert!(!client.publish(publish).is_error());
    client.disconnect();
}

/// Waits until every node in `nodes` serves exactly `payloads` (topic, payload) under
/// `filter`.
fn until_every_node_serves(nodes: &[&TestBroker], filter: &str, payloads: &[(&str, &[u8])]) {
    for node in nodes {
        wait_until_within(
            CONVERGENCE_GUARD,
            "a node serving the cluster's retained messages",
            || {
                let got: Vec<(String, Vec<u8>)> = retained_on(node, filter)
                    .into_iter()
                    .map(|(topic, payload, _)| (topic, payload))
                    .collect();
                let want: Vec<(String, Vec<u8>)> = payloads
                    .iter()
                    .map(|(topic, payload)| ((*topic).to_owned(), payload.to_vec()))
                    .collect();
                (got == want).then_some(())
            },
        );
    }
}

#[test]
fn a_retained_message_is_served_by_every_node_and_overwritten_and_cleared_everywhere() {
    let cluster = start_cluster();
    let nodes: Vec<&TestBroker> = cluster.nodes.iter().collect();
    publish_retained(nodes[0], V5, "r/a", b"v1", Some(100));
    until_every_node_serves(&nodes, "r/#", &[("r/a", b"v1")]);
    for node in &nodes {
        let (_, _, expiry) = retained_on(node, "r/a").pop().unwrap();
        let expiry = expiry.expect("the Message Expiry Interval travels");
        assert!((1..=100).contains(&expiry), "{expiry}");
    }
    publish_retained(nodes[1], V311, "r/a", b"v2", None);
    until_every_node_serves(&nodes, "r/#", &[("r/a", b"v2")]);
    assert_eq!(retained_on(nodes[2], "r/a")[0].2, None, "no expiry on v2");
    publish_retained(nodes[2], V5, "r/a", b"", None);
    until_every_node_serves(&nodes, "r/#", &[]);
}

#[test]
fn a_node_started_later_finds_the_retained_messages() {
    let nats = NatsCluster::start();
    let first = start_node(&nats, 0);
    let second = start_node(&nats, 1);
    let topics = ["late/a", "late/b/c", "late/ü d"];
    for topic in topics {
        publish_retained(&first, V5, topic, topic.as_bytes(), None);
    }
    let want: Vec<(&str, &[u8])> = topics.iter().map(|t| (*t, t.as_bytes())).collect();
    until_every_node_serves(&[&first, &second], "late/#", &want);
    let third = start_node(&nats, 2);
    until_every_node_serves(&[&third], "late/#", &want);
}

/// Three nodes overwrite one topic's retained message in turn, quickly: however the writes
/// interleave in the bucket, every node ends with the same message.
#[test]
fn racing_retained_publishes_end_the_same_on_every_node() {
    let cluster = start_cluster();
    let nodes: Vec<&TestBroker> = cluster.nodes.iter().collect();
    let mut publishers: Vec<RawClient> = nodes
        .iter()
        .enumerate()
        .map(|(index, node)| RawClient::connected_clean(node.addr(), V5, &format!("race{index}")))
        .collect();
    for round in 0..30u16 {
        for (index, publisher) in publishers.iter_mut().enumerate() {
            let payload = format!("n{index}-{round}");
            let mut publish = publish_packet("race", payload.as_bytes(), QoS::AtMostOnce, None);
            publish.retain = true;
            publisher.publish(publish);
        }
    }
    for publisher in &mut publishers {
        publisher.ping(); // every publish read by its node
    }
    // Every node serves the same message, and still does a second later (no write was on
    // its way any more).
    let mut agreed: Option<(Vec<u8>, Instant)> = None;
    let last = wait_until_within(
        CONVERGENCE_GUARD,
        "every node serving the same last message",
        || {
            let seen: Vec<Vec<u8>> = nodes
                .iter()
                .map(|node| retained_on(node, "race").pop().map(|(_, p, _)| p))
                .collect::<Option<_>>()?;
            if !seen.windows(2).all(|w| w[0] == w[1]) {
                agreed = None;
                return None;
            }
            match &agreed {
                Some((value, since)) if *value == seen[0] => {
                    (since.elapsed() >= Duration::from_secs(1)).then(|| value.clone())
                }
                _ => {
                    agreed = Some((seen[0].clone(), Instant::now()));
                    None
                }
            }
        },
    );
    let text = String::from_utf8(last).unwrap();
    assert!(text.ends_with("-29"), "a last round's message, not {text}");
}
