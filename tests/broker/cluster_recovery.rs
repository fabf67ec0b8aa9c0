//! A node dies with a connected persistent subscriber (docs/cluster.md, "When a node dies"):
//! the subscriber resumes on another node, and every QoS 1 message acknowledged to its
//! publisher meanwhile reaches it (the claiming node reads what the session missed from the
//! replay stream; issue 48, item 1).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use codec::{Packet, QoS, ReasonCode};

use crate::client::{RawClient, V5, V311, publish_packet};
use crate::cluster::{start_node_with, until_routed};
use crate::cluster_acks::{
    Received, read_acks, read_all_acks, receive_in_background, wait_for_window,
};
use crate::cluster_sessions::{
    cluster_process, connect_persistent_to, reconnect_once_released_with, wait_for_metric,
};
use crate::harness::{TestBroker, wait_until_within};
use crate::nats_cluster::NatsCluster;

/// QoS 1 messages published, one every [`PACE`] (200 a second, 8 s in all).
pub(crate) const COUNT: u16 = 1600;
pub(crate) const PACE: Duration = Duration::from_millis(5);
/// The subscribers' node is killed after this many messages (1.5 s in).
pub(crate) const KILL_AFTER: u16 = 300;
/// A hang guard for the subscribers to receive what they will, not a timing assertion.
const SETTLE_GUARD: Duration = Duration::from_secs(30);
const TOPIC: &str = "recover/t";

/// Two persistent subscribers (5.0 and 3.1.1, QoS 1) connected to node 0, a real process; a
/// publisher on node 1 sends QoS 1 at 200 a second; node 0 is killed with SIGKILL in the
/// middle. Each subscriber reconnects to node 2 (refused with 0x88 while node 0's heartbeat
/// lasts), resumes its session (Session Present 1) and receives every message whose PUBACK
/// was Success: those published while it was away included (read from the replay stream),
/// duplicates allowed.
#[test]
fn every_acknowledged_message_reaches_a_subscriber_whose_node_died() {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let (doomed, metrics_port, publishing, survivor) = three_nodes(&nats, work.path());
    let ids = [(V5, "recover-5"), (V311, "recover-3")];
    let mut subscribers: Vec<RawClient> = ids
        .iter()
        .map(|&(protocol, id)| {
            let (mut client, _) = connect_persistent_to(doomed.addr, protocol, id);
            client.subscribe("recover/#", QoS::AtLeastOnce);
            client
        })
        .collect();
    // Two CONNECTs and two SUBSCRIBEs mirrored.
    wait_for_metric(metrics_port, "ringmq_cluster_mirror_writes_total", 4);
    let mut publisher = RawClient::connected_clean(publishing.addr(), V5, "recover-pub");
    let mut routed: Vec<&mut RawClient> = subscribers.iter_mut().collect();
    until_routed(&mut publisher, "recover/p", &mut routed);
    let stop = Arc::new(AtomicBool::new(false));
    let before: Vec<JoinHandle<Received>> = subscribers
        .into_iter()
        .map(|client| receive_in_background(client, Arc::clone(&stop)))
        .collect();

    let sending = std::thread::spawn(move || publish_paced(publisher));
    std::thread::sleep(PACE * u32::from(KILL_AFTER));
    doomed.kill_9();
    let after: Vec<JoinHandle<Received>> = ids
        .iter()
        .map(|&(protocol, id)| {
            let (client, present) = reconnect_once_released_with(&survivor, protocol, id);
            assert!(present, "{id}: the session came back from the mirror");
            receive_in_background(client, Arc::clone(&stop))
        })
        .collect();
    let success = acknowledged(&sending.join().unwrap());
    settle(&survivor);
    stop.store(true, Ordering::Relaxed);
    let figures = survivor.cluster_figures().unwrap();
    for ((before, after), (_, id)) in before.into_iter().zip(after).zip(ids) {
        let (before, after) = (before.join().unwrap(), after.join().unwrap());
        let replayed = (figures.sessions_replayed, figures.sessions_replay_failures);
        assert_none_lost(id, &success, (&before, &after), replayed);
    }
    assert_eq!(figures.sessions_recovered, 2);
    assert_eq!(figures.sessions_replay_failures, 0);
}

/// Node 0 as a real process (to be killed; its operations port), node 1 (the publishers') and
/// node 2 (where the subscribers resume), `node_timeout_ms = 2000` each.
pub(crate) fn three_nodes(
    nats: &NatsCluster,
    dir: &std::path::Path,
) -> (crate::process::BrokerProcess, u16, TestBroker, TestBroker) {
    let (doomed, metrics_port) = cluster_process(nats, dir);
    let publishing = start_node_with(nats, 1, "node_timeout_ms = 2000");
    // Room in the recovered queues for the gap (about 5 s at 200 a second) and the duplicates
    // before it, beside what comes live meanwhile: beyond `queues.max_queued_messages` the
    // oldest copies are dropped, as in any queue.
    let survivor = start_node_with(
        nats,
        2,
        "node_timeout_ms = 2000\n[queues]\nmax_queued_messages = 5000",
    );
    (doomed, metrics_port, publishing, survivor)
}

/// The messages whose PUBACK was Success (more than nine in ten of [`COUNT`]).
pub(crate) fn acknowledged(acks: &BTreeMap<u16, ReasonCode>) -> BTreeSet<u16> {
    let success: BTreeSet<u16> = acks
        .iter()
        .filter_map(|(&id, &reason)| (reason == ReasonCode::Success).then_some(id))
        .collect();
    assert!(success.len() > usize::from(COUNT) * 9 / 10, "{acks:?}");
    success
}

/// Fails unless subscriber `id` received every message of `success` before or after the
/// kill; prints its tally with the node's figures (messages read back, failed reads).
pub(crate) fn assert_none_lost(
    id: &str,
    success: &BTreeSet<u16>,
    (before, after): (&Received, &Received),
    (replayed, failures): (u64, u64),
) {
    let got: BTreeSet<u16> = before.ids.union(&after.ids).copied().collect();
    let lost: Vec<u16> = success.difference(&got).copied().collect();
    let twice = before.ids.intersection(&after.ids).count() + before.again + after.again;
    eprintln!(
        "{id}: {} acknowledged, {} before the kill, {} after, {twice} more than once, lost {}; replayed {replayed}, failures {failures}",
        success.len(),
        before.ids.len(),
        after.ids.len(),
        lost.len(),
    );
    assert!(
        lost.is_empty(),
        "{id}: acknowledged but never delivered: {lost:?}"
    );
}

/// Sends [`COUNT`] QoS 1 messages on [`TOPIC`] (payload: the number, big-endian, also the
/// packet id), one every [`PACE`], a bounded number without their PUBACK; each PUBACK's
/// reason by packet id.
pub(crate) fn publish_paced(publisher: RawClient) -> BTreeMap<u16, ReasonCode> {
    publish_paced_at(publisher, QoS::AtLeastOnce)
}

/// [`publish_paced`] at `qos` (1 or 2: then each PUBREC's reason, its PUBREL sent).
pub(crate) fn publish_paced_at(mut publisher: RawClient, qos: QoS) -> BTreeMap<u16, ReasonCode> {
    let mut acks = BTreeMap::new();
    let start = Instant::now();
    for n in 1..=COUNT {
        read_acks(&mut publisher, &mut acks, start + PACE * u32::from(n));
        wait_for_window(&mut publisher, &mut acks, n - 1);
        let publish = publish_packet(TOPIC, &n.to_be_bytes(), qos, Some(n));
        publisher.send(&Packet::Publish(publish));
    }
    read_all_acks(&mut publisher, &mut acks, COUNT, SETTLE_GUARD);
    acks
}

/// Waits until the messages the survivor received from the cluster and from replays stop
/// moving for 2 s (a hang guard), so that the subscribers have received what they will.
pub(crate) fn settle(survivor: &crate::harness::TestBroker) {
    settle_while(|| {
        let figures = survivor.cluster_figures()?;
        Some(figures.messages_in + figures.replayed)
    });
}

/// Waits until `received` (what a node received, `None` while it cannot be read) stops moving
/// for 2 s, at most [`SETTLE_GUARD`] (a hang guard), so that the subscribers have received
/// what they will.
pub(crate) fn settle_while(mut received: impl FnMut() -> Option<u64>) {
    let mut last = u64::MAX;
    wait_until_within(
        SETTLE_GUARD,
        "the subscribers received what they will",
        || {
            std::thread::sleep(Duration::from_secs(2));
            let now = received()?;
            let still = now == last;
            last = now;
            still.then_some(())
        },
    );
}

/// The subscriber's node is killed this late in the run of
/// [`a_node_started_after_the_death_reads_from_the_dead_runs_last_stamp`]
/// (5 s in), long after its subscriber's mirror record was written.
const KILL_LATE: u16 = 1000;

/// A node that started after another died never saw the dead node's heartbeat: the session it
/// recovers reads what it missed from 2 s before the dead run's last "alive at" stamp, not from
/// 2 s before the session's mirror record (its SUBSCRIBE, 5 s before the death): the messages
/// of the run's first second are not delivered again. Nothing acknowledged is lost.
#[test]
fn a_node_started_after_the_death_reads_from_the_dead_runs_last_stamp() {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let (doomed, metrics_port) = cluster_process(&nats, work.path());
    let publishing = start_node_with(&nats, 1, "node_timeout_ms = 2000");
    let stop = Arc::new(AtomicBool::new(false));
    let mirrored = || wait_for_metric(metrics_port, "ringmq_cluster_mirror_writes_total", 2);
    let clients = (doomed.addr, publishing.addr(), "late-claim");
    let (before, sending) = subscribed_and_sending(clients, mirrored, &stop);
    std::thread::sleep(PACE * u32::from(KILL_LATE));
    doomed.kill_9();
    // The dead node's heartbeat record expires after node_timeout_ms (2 s); the new node
    // starts well after, so it never lists it.
    std::thread::sleep(Duration::from_secs(5));
    let survivor = start_node_with(
        &nats,
        2,
        "node_timeout_ms = 2000\n[queues]\nmax_queued_messages = 5000",
    );
    let (client, present) = reconnect_once_released_with(&survivor, V5, "late-claim");
    assert!(present, "the session came back from the mirror");
    let after = receive_in_background(client, Arc::clone(&stop));
    let success = acknowledged(&sending.join().unwrap());
    settle(&survivor);
    stop.store(true, Ordering::Relaxed);
    let (before, after) = (before.join().unwrap(), after.join().unwrap());
    let figures = survivor.cluster_figures().unwrap();
    let replayed = (figures.sessions_replayed, figures.sessions_replay_failures);
    assert_none_lost("late-claim", &success, (&before, &after), replayed);
    assert_eq!(figures.sessions_recovered, 1);
    let first_second: Vec<u16> = (1..=200).filter(|id| after.ids.contains(id)).collect();
    assert!(
        first_second.is_empty(),
        "read back from before the dead run's last stamp: {first_second:?}"
    );
}

/// A persistent 5.0 subscriber `id` at `subscriber_at` (QoS 1 on `recover/#`), receiving in the
/// background until `stop`, and once `ready()` returns and a probe from a publisher at
/// `publisher_at` reaches it, [`publish_paced`] on a thread (its acknowledgements).
pub(crate) fn subscribed_and_sending(
    (subscriber_at, publisher_at, id): (std::net::SocketAddr, std::net::SocketAddr, &str),
    ready: impl FnOnce(),
    stop: &Arc<AtomicBool>,
) -> (JoinHandle<Received>, JoinHandle<BTreeMap<u16, ReasonCode>>) {
    let (mut subscriber, _) = connect_persistent_to(subscriber_at, V5, id);
    subscriber.subscribe("recover/#", QoS::AtLeastOnce);
    ready();
    let mut publisher = RawClient::connected_clean(publisher_at, V5, &format!("{id}-pub"));
    until_routed(&mut publisher, "recover/p", &mut [&mut subscriber]);
    let receiving = receive_in_background(subscriber, Arc::clone(stop));
    (
        receiving,
        std::thread::spawn(move || publish_paced(publisher)),
    )
}
