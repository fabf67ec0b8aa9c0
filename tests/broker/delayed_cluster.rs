//! Delayed publish across nodes (`[cluster]`, issue 49): the node that received a
//! `$delayed/` PUBLISH keeps it, and when it fires it is handed to the cluster like any
//! PUBLISH, so a subscriber on another node gets it, after its delay, at the target topic.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::{Duration, Instant};

use codec::{QoS, ReasonCode};

use crate::client::{RawClient, V5};
use crate::cluster::{next_message, start_node, start_node_with, until_routed};
use crate::nats_cluster::NatsCluster;

#[test]
fn a_delayed_message_reaches_a_subscriber_on_another_node_after_its_delay() {
    let nats = NatsCluster::start();
    let keeper = start_node_with(&nats, 0, "[delayed]\nenabled = true");
    let other = start_node(&nats, 1);
    let mut subscriber = RawClient::connected_clean(other.addr(), V5, "far-sub");
    subscriber.subscribe("far/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(keeper.addr(), V5, "far-pub");
    until_routed(&mut publisher, "far/probe", &mut [&mut subscriber]);
    let sent = Instant::now();
    let reason = publisher.publish_simple("$delayed/2/far/x", b"later", QoS::AtLeastOnce);
    assert_eq!(reason, ReasonCode::Success);
    let got = next_message(&mut subscriber);
    assert!(
        sent.elapsed() >= Duration::from_secs(2),
        "{:?}",
        sent.elapsed()
    );
    assert_eq!((got.topic(), got.payload()), ("far/x", &b"later"[..]));
    assert_eq!(keeper.metrics().delayed_published, 1);
}
