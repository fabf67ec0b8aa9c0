//! Client ids across the nodes of a cluster (docs/cluster.md, "Sessions across nodes"): a
//! client that connects to another node takes its session over, the old connection closed with
//! 0x8E, its subscriptions, queue and messages in flight moved with it; a node that is gone
//! loses its client ids after `cluster.node_timeout_ms`.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use codec::{Publish, QoS, ReasonCode};

use crate::client::{Event, ProtocolVersion, RawClient, V5, V311, persistent_connect};
use crate::cluster::{CONVERGENCE_GUARD, is_probe, start_cluster, start_node_with, until_routed};
use crate::harness::{POLL_DEADLINE, TestBroker};
use crate::nats_cluster::NatsCluster;
use crate::ports::free_port;
use crate::process::BrokerProcess;

/// The next PUBLISH that is not a probe, left unacknowledged.
pub(crate) fn next_real(client: &mut RawClient) -> Publish {
    loop {
        let publish = client.expect_publish();
        if !is_probe(&publish) {
            return publish;
        }
        client.acknowledge(&publish);
    }
}

/// Connects `id` with a persistent session to `node`; CONNACK's Session Present.
fn connect_persistent(node: &TestBroker, protocol: ProtocolVersion, id: &str) -> (RawClient, bool) {
    connect_persistent_to(node.addr(), protocol, id)
}

#[test]
fn a_client_moving_to_another_node_keeps_its_subscriptions_queue_and_messages_in_flight() {
    let cluster = start_cluster();
    for (round, protocol) in [V5, V311].into_iter().enumerate() {
        let id = format!("mover{round}");
        let topic = format!("move{round}");
        let (mut device, present) = connect_persistent(&cluster.nodes[0], protocol, &id);
        assert!(!present);
        device.subscribe(&format!("{topic}/#"), QoS::AtLeastOnce);
        let mut publisher = cluster.client(0, V5, &format!("pub{round}"), &[]);
        // Two copies sent and not acknowledged (in flight), then three queued while offline.
        for n in 0..2 {
            publisher.publish_simple(&format!("{topic}/{n}"), b"m", QoS::AtLeastOnce);
        }
        let unacked: Vec<Publish> = (0..2).map(|_| next_real(&mut device)).collect();
        device.drop_abruptly();
        for n in 2..5 {
            publisher.publish_simple(&format!("{topic}/{n}"), b"m", QoS::AtLeastOnce);
        }
        let (mut moved, present) = connect_persistent(&cluster.nodes[1], protocol, &id);
        assert!(present, "the session came from node 0");
        // In flight first, again with DUP under the same packet ids, then the queue, in order.
        for before in &unacked {
            let again = moved.expect_publish();
            assert!(again.dup, "{again:?}");
            assert_eq!(again.packet_id, before.packet_id);
            assert_eq!(again.topic(), before.topic());
            moved.acknowledge(&again);
        }
        for n in 2..5 {
            let publish = moved.expect_publish();
            assert_eq!(publish.topic(), format!("{topic}/{n}"));
            moved.acknowledge(&publish);
        }
        // The subscription moved too: messages published on a third node arrive here.
        let mut far = cluster.client(2, V5, &format!("far{round}"), &[]);
        until_routed(&mut far, &format!("{topic}/p"), &mut [&mut moved]);
        far.publish_simple(&format!("{topic}/after"), b"m", QoS::AtLeastOnce);
        assert_eq!(next_real(&mut moved).topic(), format!("{topic}/after"));
    }
    let taken = cluster.nodes[1]
        .cluster_figures()
        .unwrap()
        .sessions_taken_over;
    let released = cluster.nodes[0]
        .cluster_figures()
        .unwrap()
        .sessions_released;
    assert!(
        taken >= 2 && released >= 2,
        "{taken} taken over, {released} released"
    );
    let port = cluster.nodes[1].http_addr().port();
    let metrics = crate::nats_cluster::http_get(port, "/metrics").unwrap();
    let line = format!("ringmq_cluster_sessions_taken_over_total {taken}");
    assert!(metrics.contains(&line), "{metrics}");
}

#[test]
fn a_connected_client_is_taken_over_from_another_node_with_0x8e() {
    let cluster = start_cluster();
    for (round, protocol) in [V5, V311].into_iter().enumerate() {
        let id = format!("twin{round}");
        let (mut first, _) = connect_persistent(&cluster.nodes[0], protocol, &id);
        first.subscribe("twin/#", QoS::AtLeastOnce);
        let (_second, present) = connect_persistent(&cluster.nodes[2], protocol, &id);
        assert!(present);
        first.expect_disconnect(ReasonCode::SessionTakenOver);
    }
    // A Clean Start on another node discards the session there and starts afresh.
    let (mut third, present) = RawClient::connect(
        cluster.nodes[1].addr(),
        crate::client::connect_packet(V5, "twin0", true),
    );
    assert!(!present.session_present);
    third.ping();
}

/// Connects `id` (persistent, 5.0) to `node` until its old node's heartbeat has expired: 0x88
/// (Server unavailable) before that; the client and Session Present.
fn reconnect_once_released(node: &TestBroker, id: &str) -> (RawClient, bool) {
    reconnect_once_released_with(node, V5, id)
}

/// [`reconnect_once_released`] with `protocol` (3.1.1 refusals: return code 3, the same).
pub(crate) fn reconnect_once_released_with(
    node: &TestBroker,
    protocol: ProtocolVersion,
    id: &str,
) -> (RawClient, bool) {
    reconnect_once_released_at(node.addr(), protocol, id)
}

/// [`reconnect_once_released_with`] to an address.
pub(crate) fn reconnect_once_released_at(
    addr: std::net::SocketAddr,
    protocol: ProtocolVersion,
    id: &str,
) -> (RawClient, bool) {
    let deadline = Instant::now() + POLL_DEADLINE;
    loop {
        assert!(
            Instant::now() < deadline,
            "the client id was never released"
        );
        let (client, connack) = RawClient::connect(addr, persistent_connect(protocol, id, 300));
        if connack.reason_code == ReasonCode::Success {
            return (client, connack.session_present);
        }
        assert_eq!(connack.reason_code, ReasonCode::ServerUnavailable);
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A stored session whose queue outgrew `persistence.memory_queue_messages` moves to another
/// node whole: the copies it held on disk only come along, after those in memory, in order.
#[test]
fn a_moving_session_takes_the_part_of_its_queue_held_on_disk_along() {
    let nats = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let stored = format!(
        "[persistence]\nengine = \"redb\"\ndir = \"{}\"\nmemory_queue_messages = 3\n",
        dir.path().display()
    );
    let first = start_node_with(&nats, 0, &stored);
    let second = start_node_with(&nats, 1, "");
    let (mut deep, _) = connect_persistent(&first, V5, "deep");
    deep.subscribe("deep/#", QoS::AtLeastOnce);
    deep.disconnect();
    let mut publisher = RawClient::connected_clean(first.addr(), V5, "deep-pub");
    for n in 0..10u8 {
        publisher.publish_simple("deep/t", &[n], QoS::AtLeastOnce);
    }
    let (mut moved, present) = connect_persistent(&second, V5, "deep");
    assert!(present, "the session moved");
    for n in 0..10u8 {
        let publish = next_real(&mut moved);
        assert_eq!(publish.payload(), &[n], "copy {n}");
        moved.acknowledge(&publish);
    }
    crate::cluster::expect_no_message(&mut moved);
}

/// Whether `client` is still connected: it answers a PINGREQ (a connection taken over finds
/// its DISCONNECT 0x8E, or its close, first).
fn still_connected(client: &mut RawClient) -> bool {
    client.send(&codec::Packet::PingReq(codec::PingReq));
    loop {
        match client.next_event(crate::client::READ_TIMEOUT) {
            Event::Packet(packet) => match *packet {
                codec::Packet::PingResp(_) => return true,
                codec::Packet::Disconnect(_) => return false,
                _ => {}
            },
            Event::Closed => return false,
            Event::Timeout => panic!("neither PINGRESP nor a close"),
        }
    }
}

/// Two CONNECTs of one client id on two nodes at the same moment, ten rounds: each round
/// leaves exactly one of them connected (the other taken over with 0x8E, or refused with
/// 0x88 while its owner is busy), never both.
#[test]
fn simultaneous_connects_of_one_client_id_on_two_nodes_leave_one_connected() {
    let cluster = start_cluster();
    for round in 0..10 {
        let id = format!("twin-{round}");
        let start = Arc::new(Barrier::new(2));
        let connecting: Vec<_> = [0, 1]
            .map(|node| {
                let (addr, start, id) =
                    (cluster.nodes[node].addr(), Arc::clone(&start), id.clone());
                std::thread::spawn(move || {
                    start.wait();
                    RawClient::connect(addr, persistent_connect(V5, &id, 300))
                })
            })
            .into_iter()
            .collect();
        // Both CONNECTs answered first: a takeover is complete once its CONNACK is out.
        let clients: Vec<_> = connecting.into_iter().map(|h| h.join().unwrap()).collect();
        let mut connected = 0;
        for (mut client, connack) in clients {
            if connack.reason_code == ReasonCode::Success && still_connected(&mut client) {
                connected += 1;
            }
        }
        assert_eq!(
            connected, 1,
            "round {round}: connections left with client id {id}"
        );
    }
}

/// A node that is gone (killed without handing anything over) loses its client ids once its
/// heartbeat has expired: the client connects to another node, refused with 0x88 (Server
/// unavailable, 3.1.1: 3) only while the node may still be alive.
#[test]
fn the_client_ids_of_a_node_that_is_gone_are_taken_after_the_node_timeout() {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    // A real process killed with SIGKILL: it removes nothing on its way out (a node stopped
    // gracefully removes the owner records of the sessions that end with it).
    let (doomed, _) = cluster_process(&nats, work.path());
    let survivor = start_node_with(&nats, 1, "node_timeout_ms = 2000");
    // A session that ends with its connection: nothing of it is mirrored.
    let client = RawClient::connected_clean(doomed.addr, V5, "orphan");
    doomed.kill_9();
    drop(client);
    let (mut client, present) = reconnect_once_released(&survivor, "orphan");
    assert!(!present, "the session was on the node that is gone");
    client.ping();
    assert!(survivor.cluster_figures().unwrap().sessions_lost >= 1);
}

/// Every node sums the live nodes' heartbeats into the cluster's totals
/// (`ringmq_cluster_total_*`, `$SYS/broker/cluster/total/...`).
#[test]
fn every_node_reports_the_cluster_totals() {
    let cluster = start_cluster();
    let _clients: Vec<RawClient> = [0, 0, 2]
        .iter()
        .enumerate()
        .map(|(n, node)| cluster.client(*node, V5, &format!("counted{n}"), &["t/#"]))
        .collect();
    for node in &cluster.nodes {
        let totals = "totals over three nodes and three clients";
        crate::harness::wait_until_within(CONVERGENCE_GUARD, totals, || {
            let f = node.cluster_figures()?;
            (f.total_nodes == 3 && f.total_clients == 3 && f.total_subscriptions == 3).then_some(())
        });
    }
    let port = cluster.nodes[1].http_addr().port();
    let metrics = crate::nats_cluster::http_get(port, "/metrics").unwrap();
    assert!(
        metrics.contains("ringmq_cluster_total_clients 3"),
        "{metrics}"
    );
}

/// A node killed with SIGKILL while a client's persistent session is offline there: the QoS 1
/// copies queued for it (mirrored in JetStream) reach the client when it reconnects to another
/// node, in order, with its subscription.
#[test]
fn a_session_offline_on_a_node_killed_with_sigkill_resumes_elsewhere_with_its_queue() {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let (doomed, metrics_port) = cluster_process(&nats, work.path());
    let survivor = start_node_with(&nats, 1, "node_timeout_ms = 2000");
    let (mut sleeper, _) = connect_persistent_to(doomed.addr, V5, "sleeper");
    sleeper.subscribe("dead/#", QoS::AtLeastOnce);
    sleeper.disconnect();
    let mut publisher = RawClient::connected_clean(doomed.addr, V5, "last-words");
    for n in 1..=3 {
        publisher.publish_simple(&format!("dead/{n}"), b"m", QoS::AtLeastOnce);
    }
    // Its records at the CONNECT, the SUBSCRIBE and the disconnect, and the three copies, are
    // in JetStream.
    wait_for_metric(metrics_port, "ringmq_cluster_mirror_writes_total", 6);
    doomed.kill_9();
    let (mut resumed, present) = reconnect_once_released(&survivor, "sleeper");
    assert!(present, "the session came back from the mirror");
    for n in 1..=3 {
        let publish = resumed.expect_publish();
        assert_eq!(publish.topic(), format!("dead/{n}"));
        resumed.acknowledge(&publish);
    }
    assert_eq!(survivor.cluster_figures().unwrap().sessions_recovered, 1);
    // Its subscription lives on the survivor now.
    let mut local = RawClient::connected_clean(survivor.addr(), V5, "afterwards");
    local.publish_simple("dead/after", b"m", QoS::AtLeastOnce);
    // The recovery's follow-up read of the replay stream may bring a mirrored copy again (QoS
    // 1 is at least once; docs/cluster.md, "When a node dies"): only those may come first.
    loop {
        let publish = next_real(&mut resumed);
        if publish.topic() == "dead/after" {
            break;
        }
        assert!(
            ["dead/1", "dead/2", "dead/3"].contains(&publish.topic()),
            "{}",
            publish.topic()
        );
        resumed.acknowledge(&publish);
    }
}

/// A node killed with SIGKILL while a client with a persistent session is connected there:
/// its subscriptions (mirrored at its SUBSCRIBE) come back when it reconnects to another node,
/// with Session Present, on both protocol versions; a client whose session ended with its
/// connection gets a new one. What the subscriptions match reaches it there.
#[test]
fn a_session_connected_on_a_node_killed_with_sigkill_resumes_elsewhere_with_its_subscriptions() {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let (doomed, metrics_port) = cluster_process(&nats, work.path());
    let survivor = start_node_with(&nats, 1, "node_timeout_ms = 2000");
    let (mut v5, _) = connect_persistent_to(doomed.addr, V5, "awake-5");
    v5.subscribe("awake/5/#", QoS::AtLeastOnce);
    let (mut v311, _) = connect_persistent_to(doomed.addr, V311, "awake-3");
    v311.subscribe("awake/3/+", QoS::AtLeastOnce);
    v311.subscribe("awake/3/gone", QoS::AtLeastOnce);
    v311.unsubscribe("awake/3/gone");
    let clean = RawClient::connected_clean(doomed.addr, V5, "awake-clean");
    // Two CONNECTs, three SUBSCRIBEs and one UNSUBSCRIBE mirrored; the clean session not.
    wait_for_metric(metrics_port, "ringmq_cluster_mirror_writes_total", 6);
    doomed.kill_9();
    drop((v5, v311, clean));
    let (mut v5, present) = reconnect_once_released(&survivor, "awake-5");
    assert!(present, "the 5.0 session came back from the mirror");
    let (mut v311, present) = reconnect_once_released_with(&survivor, V311, "awake-3");
    assert!(present, "the 3.1.1 session came back from the mirror");
    let (_, present) = reconnect_once_released(&survivor, "awake-clean");
    assert!(
        !present,
        "a session that ended with its connection is not mirrored"
    );
    let mut publisher = RawClient::connected_clean(survivor.addr(), V5, "wake-up");
    for (topic, client) in [("awake/5/a/b", &mut v5), ("awake/3/x", &mut v311)] {
        publisher.publish_simple(topic, b"m", QoS::AtLeastOnce);
        let publish = next_real(client);
        assert_eq!(publish.topic(), topic);
        client.acknowledge(&publish);
    }
    publisher.publish_simple("awake/3/gone/x", b"m", QoS::AtLeastOnce);
    crate::cluster::expect_no_message(&mut v311);
    assert_eq!(survivor.cluster_figures().unwrap().sessions_recovered, 2);
}

/// Node `n0` as a real process on NATS server 0 (`node_timeout_ms = 2000`), its operations
/// listener on a free port; returned once connected with its buckets open.
pub(crate) fn cluster_process(nats: &NatsCluster, dir: &std::path::Path) -> (BrokerProcess, u16) {
    let http = free_port();
    let config = format!(
        "[cluster]\nnode_id = \"n0\"\nnats = [\"{}\"]\nreplicas = 3\nnode_timeout_ms = 2000\n\
         [http]\nbind = \"127.0.0.1:{http}\"\n[persistence]\nengine = \"none\"\n",
        nats.url(0)
    );
    let process = BrokerProcess::start(&config, &dir.join("n0.toml"));
    wait_for_metric(http, "ringmq_cluster_ownership_ready", 1);
    (process, http)
}

/// Waits until the unlabelled metric `name` on the operations listener at `port` is `at_least`.
pub(crate) fn wait_for_metric(port: u16, name: &str, at_least: u64) {
    crate::harness::wait_until(name, || {
        let document = crate::nats_cluster::http_get(port, "/metrics")?;
        (crate::cluster::metric(&document, name)? >= at_least).then_some(())
    });
}

/// [`connect_persistent`] to an address.
pub(crate) fn connect_persistent_to(
    addr: std::net::SocketAddr,
    protocol: ProtocolVersion,
    id: &str,
) -> (RawClient, bool) {
    let (client, connack) = RawClient::connect(addr, persistent_connect(protocol, id, 300));
    assert_eq!(connack.reason_code, ReasonCode::Success, "{connack:?}");
    (client, connack.session_present)
}

/// A node that comes back (same `node_id`, same store) after its offline client resumed on
/// another node ends the stale copy it recovered from its store: it holds no session any more,
/// and a message published there reaches the client once, through the node that owns it now.
#[test]
fn a_node_back_after_its_client_moved_ends_its_stale_copy() {
    let nats = NatsCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let stored = format!(
        "node_timeout_ms = 2000\n[persistence]\nengine = \"redb\"\ndir = \"{}\"\n",
        dir.path().display()
    );
    let first_run = start_node_with(&nats, 0, &stored);
    let survivor = start_node_with(&nats, 1, "node_timeout_ms = 2000");
    let (mut roamer, _) = connect_persistent(&first_run, V5, "roamer");
    roamer.subscribe("roam/#", QoS::AtLeastOnce);
    roamer.disconnect();
    crate::harness::wait_until("the offline session mirrored", || {
        // At the CONNECT, the SUBSCRIBE and the disconnect.
        (first_run.cluster_figures()?.mirror_writes >= 3).then_some(())
    });
    drop(first_run);
    let (mut roamer, present) = reconnect_once_released(&survivor, "roamer");
    assert!(present);
    let back = start_node_with(&nats, 0, &stored);
    let port = back.http_addr().port();
    crate::harness::wait_until("the stale copy ended on the node that came back", || {
        let metrics = crate::nats_cluster::http_get(port, "/metrics")?;
        (crate::cluster::metric(&metrics, "ringmq_sessions")? == 0).then_some(())
    });
    let mut publisher = RawClient::connected_clean(back.addr(), V5, "roam-pub");
    until_routed(&mut publisher, "roam/p", &mut [&mut roamer]);
    publisher.publish_simple("roam/x", b"m", QoS::AtLeastOnce);
    let publish = next_real(&mut roamer);
    assert_eq!(publish.topic(), "roam/x");
    roamer.acknowledge(&publish);
    crate::cluster::expect_no_message(&mut roamer);
}
