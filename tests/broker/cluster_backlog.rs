//! A persistent subscriber comes back to a backlog (QoS 1 or 2 messages queued while it was
//! away) and its node dies before the client has acknowledged all of it: the node that takes
//! the session over rebuilds the backlog from the mirror (docs/cluster.md, "When a node dies").
//! Before, the mirror of a connected session held no messages and the read of what it missed
//! started 2 s before the dead node's last heartbeat, after the backlog: the 300-fault run of
//! seed 5050 on 045854f lost 95 to 98 of each publisher's messages so.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::{BTreeSet, HashSet};
use std::num::NonZeroU16;
use std::time::{Duration, Instant};

use codec::{Packet, PubComp, PubRec, QoS, ReasonCode};

use crate::client::{Event, RawClient, V5, persistent_connect, publish_packet};
use crate::cluster::until_routed;
use crate::cluster_recovery::three_nodes;
use crate::cluster_sessions::{
    connect_persistent_to, reconnect_once_released_with, wait_for_metric,
};
use crate::nats_cluster::NatsCluster;

/// Messages queued for the subscriber while it is away.
const BACKLOG: u16 = 40;
/// The subscriber's Receive Maximum when it comes back: that many go out, the rest stay queued.
const WINDOW: u16 = 5;
/// A hang guard for the backlog to reach the resumed client, not a timing assertion.
const RECEIVE_GUARD: Duration = Duration::from_secs(30);
const METRIC: &str = "ringmq_cluster_mirror_writes_total";

/// Three nodes and `backlog-sub`'s offline session on node 0 (a real process,
/// `node_timeout_ms = 2000`) with [`BACKLOG`] messages of `qos` queued, 6 s old.
struct Backlogged {
    _nats: NatsCluster,
    _work: tempfile::TempDir,
    doomed: crate::process::BrokerProcess,
    metrics_port: u16,
    survivor: crate::harness::TestBroker,
    _publishing: crate::harness::TestBroker,
}

const ID: &str = "backlog-sub";

fn backlogged(qos: QoS) -> Backlogged {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let (doomed, metrics_port, publishing, survivor) = three_nodes(&nats, work.path());
    let (mut subscriber, _) = connect_persistent_to(doomed.addr, V5, ID);
    subscriber.subscribe("backlog/#", qos);
    let mut publisher = RawClient::connected_clean(publishing.addr(), V5, "backlog-pub");
    until_routed(&mut publisher, "backlog/p", &mut [&mut subscriber]);
    subscriber.disconnect();
    // The CONNECT, the SUBSCRIBE, the disconnect, then one copy each.
    wait_for_metric(metrics_port, METRIC, 3);
    for n in 0..BACKLOG {
        let publish = publish_packet("backlog/t", &n.to_be_bytes(), qos, Some(n + 1));
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
    let cluster = backlogged(QoS::AtLeastOnce);
    let mut back = back_with_window(&cluster);
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

/// As above at QoS 2: the client takes the first 5 PUBLISH packets of its backlog and holds
/// their packet ids (their PUBREC lost with the node). Resumed on node 2 it receives each of
/// the 40 once: those 5 come again under the ids it holds (DUP), which it does not deliver
/// again, not as new messages under new ids. They are older than the read of what the session
/// missed, in the mirror only, and the dead node's journal names them sent
/// (`journal_read::resume_still_out`).
#[test]
fn a_qos_2_backlog_in_flight_when_its_node_dies_comes_back_once() {
    let cluster = backlogged(QoS::ExactlyOnce);
    let mut back = back_with_window(&cluster);
    let mut holder = Qos2Holder::default();
    for _ in 0..WINDOW {
        holder.take(&back.expect_publish());
    }
    wait_for_metric(cluster.metrics_port, METRIC, 4 + u64::from(BACKLOG));
    cluster.doomed.kill_9();
    drop(back);

    let (mut resumed, present) = reconnect_once_released_with(&cluster.survivor, V5, ID);
    assert!(present, "the session came back from the mirror");
    let deadline = Instant::now() + RECEIVE_GUARD;
    while !holder.done() && Instant::now() < deadline {
        if let Event::Packet(packet) = resumed.next_event(Duration::from_millis(200)) {
            holder.answer(&mut resumed, *packet);
        }
    }
    let lost: Vec<u16> = (0..BACKLOG)
        .filter(|n| !holder.delivered.contains(n))
        .collect();
    assert!(lost.is_empty(), "never delivered: {lost:?}");
    assert_eq!(
        holder.resent,
        u32::from(WINDOW),
        "sent again under their ids"
    );
    assert!(
        holder.twice.is_empty(),
        "delivered twice: {:?} ({} sent again under their ids)",
        holder.twice,
        holder.resent
    );
}

/// A QoS 2 receiver as MQTT-4.3.3 has it: a message is delivered when its PUBLISH comes
/// under a packet id the client does not hold; the id is held until its PUBREL.
#[derive(Default)]
struct Qos2Holder {
    held: HashSet<u16>,
    delivered: BTreeSet<u16>,
    twice: Vec<u16>,
    /// PUBLISH packets that came again under an id held (not delivered again).
    resent: u32,
}

impl Qos2Holder {
    /// Takes `publish` (delivered, or not: its id held), without answering it.
    fn take(&mut self, publish: &codec::Publish) {
        let id = publish.packet_id.unwrap().get();
        if !self.held.insert(id) {
            self.resent += 1;
        } else if !self.delivered.insert(number_of(publish)) {
            self.twice.push(number_of(publish));
        }
    }

    /// Takes a packet and answers it: PUBREC to a PUBLISH, PUBCOMP to a PUBREL.
    fn answer(&mut self, client: &mut RawClient, packet: Packet) {
        match packet {
            Packet::Publish(publish) if publish.topic() == "backlog/t" => {
                self.take(&publish);
                client.send(&Packet::PubRec(PubRec::new(publish.packet_id.unwrap())));
            }
            Packet::PubRel(rel) => {
                self.held.remove(&rel.packet_id.get());
                client.send(&Packet::PubComp(PubComp::new(rel.packet_id)));
            }
            _ => {}
        }
    }

    /// Every message delivered and every id released.
    fn done(&self) -> bool {
        self.delivered.len() == usize::from(BACKLOG) && self.held.is_empty()
    }
}

/// The client comes back to node 0 and acknowledges the whole backlog: the mirror goes back to
/// the session without messages (one more write), so that after node 0's death the client,
/// resumed on node 2, gets none of it again.
#[test]
fn a_backlog_acknowledged_leaves_the_mirror() {
    let cluster = backlogged(QoS::AtLeastOnce);
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

/// The client back on node 0 with Receive Maximum [`WINDOW`], its session present.
fn back_with_window(cluster: &Backlogged) -> RawClient {
    let mut connect = persistent_connect(V5, ID, 300);
    connect.properties.receive_maximum = NonZeroU16::new(WINDOW);
    let (back, connack) = RawClient::connect(cluster.doomed.addr, connect);
    assert!(connack.session_present, "{connack:?}");
    back
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
