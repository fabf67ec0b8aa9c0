//! A persistent session moving between live nodes while messages flow (docs/cluster.md,
//! "Sessions across nodes"; issue 48): the old node ends the session and replies with its
//! snapshot; what is published from then until the new node's NATS subscriptions take effect
//! reached neither node for it, and is read back from the replay stream by the new node.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use codec::QoS;

use crate::client::{RawClient, V5};
use crate::cluster::{start_node, until_routed};
use crate::cluster_acks::{Received, receive_in_background};
use crate::cluster_recovery::{KILL_AFTER, PACE, acknowledged, publish_paced, settle_while};
use crate::cluster_sessions::{connect_persistent_to, reconnect_once_released_with};
use crate::nats_cluster::NatsCluster;

const ID: &str = "move-5";
/// Moves while the publisher sends (each a release between two live nodes).
const MOVES: u16 = 4;

/// A persistent 5.0 subscriber (QoS 1) on node 0 while a publisher on node 1 sends 1,600 QoS 1
/// messages at 200 a second; the subscriber moves to node 2, back to node 0, and so on, four
/// times a few hundred messages apart, each time resuming with Session Present 1. It receives
/// every message whose PUBACK was Success (duplicates allowed).
#[test]
fn every_acknowledged_message_reaches_a_session_moving_between_live_nodes() {
    let nats = NatsCluster::start();
    let nodes = [start_node(&nats, 0), start_node(&nats, 2)];
    let publishing = start_node(&nats, 1);
    let (mut subscriber, _) = connect_persistent_to(nodes[0].addr(), V5, ID);
    subscriber.subscribe("recover/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(publishing.addr(), V5, "move-pub");
    until_routed(&mut publisher, "recover/p", &mut [&mut subscriber]);
    let stop = Arc::new(AtomicBool::new(false));
    let mut receivers = vec![receive_in_background(subscriber, Arc::clone(&stop))];

    let sending = std::thread::spawn(move || publish_paced(publisher));
    for n in 1..=MOVES {
        std::thread::sleep(PACE * u32::from(KILL_AFTER));
        let node = &nodes[usize::from(n % 2)];
        let (subscriber, present) = reconnect_once_released_with(node, V5, ID);
        assert!(present, "move {n}: the session came along");
        receivers.push(receive_in_background(subscriber, Arc::clone(&stop)));
    }
    let success = acknowledged(&sending.join().unwrap());
    let last = &nodes[usize::from(MOVES % 2)];
    settle_while(|| {
        let figures = last.cluster_figures()?;
        Some(figures.messages_in + figures.replayed + figures.sessions_replayed)
    });
    stop.store(true, Ordering::Relaxed);
    let received: Vec<Received> = receivers.into_iter().map(|r| r.join().unwrap()).collect();
    let got: BTreeSet<u16> = received
        .iter()
        .flat_map(|r| r.ids.iter().copied())
        .collect();
    let lost: Vec<u16> = success.difference(&got).copied().collect();
    let deliveries: usize = received.iter().map(|r| r.ids.len() + r.again).sum();
    eprintln!(
        "{ID}: {} acknowledged, {deliveries} deliveries over {} connections, lost {}",
        success.len(),
        received.len(),
        lost.len()
    );
    assert!(
        lost.is_empty(),
        "acknowledged but never delivered: {lost:?}"
    );
}
