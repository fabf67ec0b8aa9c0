//! A persistent subscriber comes back to a backlog (QoS 1 messages queued while it was away)
//! and its node dies before the client has acknowledged all of it: the node that takes the
//! session over rebuilds the backlog from the mirror (docs/cluster.md, "When a node dies").
//! Before, the mirror of a connected session held no messages and the read of what it missed
//! started 2 s before the dead node's last heartbeat, after the backlog: the 300-fault run of
//! seed 5050 on 045854f lost 95 to 98 of each publisher's messages so.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::BTreeSet;
use std::num::NonZeroU16;
use std::time::{Duration, Instant};

use codec::{Packet, QoS, ReasonCode};

use crate::client::{Event, RawClient, V5, persistent_connect, publish_packet};
use crate::cluster::until_routed;
use crate::cluster_recovery::three_nodes;
use crate::cluster_sessions::{
    connect_persistent_to, reconnect_once_released_with, wait_for_metric,
};
use crate::nats_cluster::NatsCluster;

/// QoS 1 messages queued for the subscriber while it is away.
const BACKLOG: u16 = 40;
/// The subscriber's Receive Maximum when it comes back: that many go out, the rest stay queued.
const WINDOW: u16 = 5;
/// A hang guard for the backlog to reach the resumed client, not a timing assertion.
const RECEIVE_GUARD: Duration = Duration::from_secs(30);
const METRIC: &str = "ringmq_cluster_mirror_writes_total";

/// Three nodes and `backlog-sub`'s offline session on node 0 (a real process,
/// `node_timeout_ms = 2000`) with [`BACKLOG`] QoS 1 messages queued, 6 s old.
struct Backlogged {
    _nats: NatsCluster,
    _work: tempfile::TempDir,
    doomed: crate::process::BrokerProcess,
    metrics_port: u16,
    survivor: crate::harness::TestBroker,
    _publishing: crate::harness::TestBroker,
}

const ID: &str = "backlog-sub";

fn backlogged() -> Backlogged {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let (doomed, metrics_port, publishing, survivor) = three_nodes(&nats, work.path());
    let (mut subscriber, _) = connect_persistent_to(doomed.addr, V5, ID);
    subscriber.subscribe("backlog/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(publishing.addr(), V5, "backlog-pub");
    until_routed(&mut publisher, "backlog/p", &mut [&mut subscriber]);
    subscriber.disconnect();
    // The CONNECT, the SUBSCRIBE, the disconnect, then one copy each.
    wait_for_metric(metrics_port, METRIC, 3);
    for n in 0..BACKLOG {
        let publish = publish_packet("backlog/t", &n.to_be_bytes(), QoS::AtLeastOnce, Some(n + 1));
        assert_eq!(publisher.publish(publish), ReasonCode::Success);
    }
    wait_for_metric(metrics_port, METRIC, 3 + u64::from(BACKLOG));
    // Not a timing assertion: the backlog is to be older than the dead node's last heartbeat
    // less 2 s, where the read of a connected session's missed messages starts.
    std::thread::sleep(Duration::from_secs(6));
    Backlogged {
        _nats: nats,
        _work: work,
        doomed,
        metrics_port,
        survivor,
        _publishing: publishing,
    }
}

/// The client comes back to node 0 with Receive Maximum 5, takes 5 without acknowledging
/// them, and node 0 is killed once the CONNECT's mirror write is done. The client resumes on
/// node 2 (Session Present 1) and receives all 40, duplicates allowed.
#[test]
fn a_backlog_not_acknowledged_when_its_node_dies_comes_back() {
    let cluster = backlogged();
    let mut connect = persistent_connect(V5, ID, 300);
    connect.properties.receive_maximum = NonZeroU16::new(WINDOW);
    let (mut back, connack) = RawClient::connect(cluster.doomed.addr, connect);
    assert!(connack.session_present, "{connack:?}");
    let sent: BTreeSet<u16> = (0..WINDOW)
        .map(|_| number_of(&back.expect_publish()))
        .collect();
    wait_for_metric(cluster.metrics_port, METRIC, 4 + u64::from(BACKLOG));
    cluster.doomed.kill_9();
    drop(back);

    let (mut resumed, present) = reconnect_once_released_with(&cluster.survivor, V5, ID);
    assert!(present, "the session came back from the mirror");
    let received = receive_all(&mut resumed);
    let lost: Vec<u16> = (0..BACKLOG).filter(|n| !received.contains(n)).collect();
    assert!(
        lost.is_empty(),
        "sent before the kill {sent:?}; never delivered after it: {lost:?}"
    );
}

/// The client comes back to node 0 and acknowledges the whole backlog: the mirror goes back to
/// the session without messages (one more write), so that after node 0's death the client,
/// resumed on node 2, gets none of it again.
#[test]
fn a_backlog_acknowledged_leaves_the_mirror() {
    let cluster = backlogged();
    let (mut back, present) = connect_persistent_to(cluster.doomed.addr, V5, ID);
    assert!(present);
    assert_eq!(receive_all(&mut back).len(), usize::from(BACKLOG));
    wait_for_metric(cluster.metrics_port, METRIC, 5 + u64::from(BACKLOG));
    cluster.doomed.kill_9();
    drop(back);

    let (mut resumed, present) = reconnect_once_released_with(&cluster.survivor, V5, ID);
    assert!(present, "the session came back from the mirror");
    resumed.expect_silence(Duration::from_secs(2));
}

/// The message number a PUBLISH carries.
fn number_of(publish: &codec::Publish) -> u16 {
    let payload: [u8; 2] = publish.payload()[..].try_into().unwrap();
    u16::from_be_bytes(payload)
}

/// Receives and acknowledges PUBLISHes on `backlog/t` until every number below [`BACKLOG`]
/// came, or [`RECEIVE_GUARD`] passes; the numbers received.
fn receive_all(client: &mut RawClient) -> BTreeSet<u16> {
    let deadline = Instant::now() + RECEIVE_GUARD;
    let mut received = BTreeSet::new();
    while received.len() < usize::from(BACKLOG) && Instant::now() < deadline {
        let Event::Packet(packet) = client.next_event(Duration::from_millis(200)) else {
            continue;
        };
        if let Packet::Publish(publish) = *packet {
            client.acknowledge(&publish);
            if publish.topic() == "backlog/t" {
                received.insert(number_of(&publish));
            }
        }
    }
    received
}
