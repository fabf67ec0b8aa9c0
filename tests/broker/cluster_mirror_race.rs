//! A session moves off a node whose mirror writes are queued up (docs/cluster.md, "Sessions
//! across nodes"; issue 48): nothing the old node still had queued for the session may land
//! over what the new owner mirrored. The 300-fault run of seed 4848 lost a subscriber's
//! messages so: the old node's removal of the mirrored session, queued behind its other
//! mirror writes, deleted the new owner's record, and the new owner's death then found
//! nothing to recover.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use codec::QoS;

use crate::client::{RawClient, V5};
use crate::cluster::{start_node_with, until_routed};
use crate::cluster_recovery::settle_while;
use crate::cluster_sessions::{
    cluster_process, connect_persistent_to, next_real, reconnect_once_released_at,
};
use crate::nats_cluster::NatsCluster;

/// Offline persistent sessions on the old node, each queueing every message of the burst (one
/// mirror write per copy).
const OFFLINE: usize = 20;
/// QoS 1 messages of the burst.
const BURST: u16 = 300;
const ID: &str = "mirror-moved";

/// Node 1 holds a persistent 5.0 subscriber and 20 offline sessions; a burst of 300 QoS 1
/// messages queues 6,000 copies for the offline ones, each a mirror write of node 1. While
/// those are still being written, the subscriber moves to node 0 (a real process). Once node
/// 1's writes are done, node 0 is killed: the subscriber resumes on node 2 from the mirror
/// (Session Present 1) and receives what is published to its subscription there.
#[test]
fn a_session_moved_off_a_node_with_mirror_writes_queued_stays_mirrored() {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let old = start_node_with(&nats, 1, "node_timeout_ms = 2000");
    let (new, _) = cluster_process(&nats, work.path());
    let survivor = start_node_with(&nats, 2, "node_timeout_ms = 2000");
    let (mut moving, _) = connect_persistent_to(old.addr(), V5, ID);
    moving.subscribe("moved/#", QoS::AtLeastOnce);
    for n in 0..OFFLINE {
        let (mut away, _) = connect_persistent_to(old.addr(), V5, &format!("mirror-away-{n}"));
        away.subscribe("backlog/#", QoS::AtLeastOnce);
        away.disconnect();
    }
    let mut publisher = RawClient::connected_clean(old.addr(), V5, "mirror-pub");
    for n in 0..BURST {
        publisher.publish_simple("backlog/x", &n.to_be_bytes(), QoS::AtLeastOnce);
    }
    // A takeover: the old connection is closed by node 1 (0x8E).
    let (moved, present) = reconnect_once_released_at(new.addr, V5, ID);
    assert!(present, "the session moved along");
    drop(moving);
    let written_at_move = mirror_done(&old);
    settle_while(|| Some(mirror_done(&old)));
    let written = mirror_done(&old);
    assert!(
        written_at_move < written,
        "the move came while node 1 still had mirror writes queued ({written_at_move} of {written} done)"
    );
    drop(moved);
    new.kill_9();
    let (mut resumed, present) = reconnect_once_released_at(survivor.addr(), V5, ID);
    assert!(
        present,
        "the session came back from the mirror after its new node died"
    );
    let mut publisher = RawClient::connected_clean(survivor.addr(), V5, "mirror-pub-2");
    until_routed(&mut publisher, "moved/p", &mut [&mut resumed]);
    publisher.publish_simple("moved/x", b"m", QoS::AtLeastOnce);
    let publish = next_real(&mut resumed);
    assert_eq!(publish.topic(), "moved/x");
}

/// Mirror writes node `node` carried out, kept or failed.
fn mirror_done(node: &crate::harness::TestBroker) -> u64 {
    let figures = node.cluster_figures().unwrap();
    figures.mirror_writes + figures.mirror_failures
}
