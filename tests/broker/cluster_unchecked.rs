//! A client id that its node cannot check across nodes (its NATS server stopped, or frozen so
//! that the owner record is not read in time): a CONNECT that resumes a session or leaves one
//! behind is refused with 0x88 (3.1.1: return code 3) and the client retries, so that no
//! session is ever held on two nodes at once; a clean session's CONNECT is admitted
//! (docs/cluster.md, "Sessions across nodes"). `cluster.admit_unchecked_sessions = true`
//! admits both, as RingMQ did before.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::Duration;

use codec::{ConnAck, Connect, Packet, QoS, ReasonCode};

use crate::client::{
    Event, ProtocolVersion, RawClient, V5, V311, connect_packet, persistent_connect, publish_packet,
};
use crate::cluster::{start_node, start_node_with, until_routed};
use crate::cluster_sessions::{connect_persistent_to, next_real};
use crate::harness::{TestBroker, wait_until, wait_until_within};
use crate::nats_cluster::NatsCluster;

/// A hang guard for JetStream keeping a message while a NATS server is stopped, not a timing
/// assertion.
const KEPT_GUARD: Duration = Duration::from_secs(60);

/// How long a CONNACK may take: a claim waits up to `connection.connect_timeout` (10 s) less
/// 1 s, longer than the client's usual read timeout (a hang guard, not a timing assertion).
const CONNACK_GUARD: Duration = Duration::from_secs(15);

/// Sends `connect` to `node`; the client and its CONNACK, waited for up to [`CONNACK_GUARD`].
fn connect_within_guard(node: &TestBroker, connect: Connect) -> (RawClient, ConnAck) {
    match try_connect_within_guard(node, connect) {
        Ok(connected) => connected,
        Err(event) => panic!("no CONNACK: {event:?}"),
    }
}

/// [`connect_within_guard`], the event instead of a CONNACK given back.
fn try_connect_within_guard(
    node: &TestBroker,
    connect: Connect,
) -> Result<(RawClient, ConnAck), Event> {
    let mut client = RawClient::open(node.addr(), connect.protocol);
    client.send(&Packet::from(connect));
    match client.next_event(CONNACK_GUARD) {
        Event::Packet(packet) => match *packet {
            Packet::ConnAck(connack) => Ok((client, *connack)),
            other => panic!("expected CONNACK, got {other:?}"),
        },
        other => Err(other),
    }
}

/// The reason code of a CONNECT of `id` to `node` (persistent: Session Expiry 300 s in 5.0,
/// no Clean Session in 3.1.1).
fn persistent_connack(node: &TestBroker, protocol: ProtocolVersion, id: &str) -> ReasonCode {
    connect_within_guard(node, persistent_connect(protocol, id, 300))
        .1
        .reason_code
}

/// Connects `id` (persistent, 5.0) to `node` until it is admitted, refused with 0x88 before
/// (while its node cannot check it, or the session's node has not released it) or closed
/// without a CONNACK (the CONNECT's timeout, should a claim outlast it while JetStream elects
/// new leaders after a NATS server came back or resumed; the session then waits there,
/// detached, and the next claim of the id on that node starts only once it is answered); the
/// client and Session Present.
fn admitted(node: &TestBroker, id: &str) -> (RawClient, bool) {
    wait_until_within(KEPT_GUARD, "the session admitted", || {
        let (client, connack) =
            match try_connect_within_guard(node, persistent_connect(V5, id, 300)) {
                Ok(connected) => connected,
                Err(Event::Closed) => return None,
                Err(other) => panic!("no CONNACK: {other:?}"),
            };
        if connack.reason_code == ReasonCode::Success {
            return Some((client, connack.session_present));
        }
        assert_eq!(connack.reason_code, ReasonCode::ServerUnavailable);
        std::thread::sleep(Duration::from_millis(200));
        None
    })
}

/// Publishes QoS 1 on `topic` until the PUBACK is Success: with a NATS server stopped,
/// JetStream may elect new leaders first (the acknowledgement waits, and is refused past
/// `cluster.ack_timeout_ms`).
fn acknowledged_once_kept(publisher: &mut RawClient, topic: &str) {
    wait_until_within(KEPT_GUARD, "a PUBACK with Success", || {
        let id = publisher.next_packet_id();
        let publish = publish_packet(topic, b"q", QoS::AtLeastOnce, Some(id));
        publisher.send(&Packet::Publish(publish));
        loop {
            match publisher.next_event(KEPT_GUARD) {
                Event::Packet(packet) => match *packet {
                    Packet::PubAck(ack) if ack.packet_id.get() == id => {
                        break (ack.reason_code == ReasonCode::Success).then_some(());
                    }
                    _ => {}
                },
                other => panic!("waiting for the PUBACK: {other:?}"),
            }
        }
    });
}

/// Waits until `node`'s main NATS connection is `up` (1) or lost (0).
fn until_connected(node: &TestBroker, up: u64) {
    wait_until("the node's NATS connection", || {
        (node.cluster_figures()?.connected == up).then_some(())
    });
}

/// A session held offline on node 0; node 1's NATS server stopped: node 1 refuses the
/// session's CONNECT (it would have started a second, empty copy, and the one on node 0 would
/// have gone on queueing), admits a clean session, and once NATS is back the session moves
/// to node 1 whole, with the message queued for it meanwhile.
#[test]
fn a_persistent_session_is_refused_while_its_node_cannot_reach_nats_then_moves_whole() {
    let mut nats = NatsCluster::start();
    let home = start_node(&nats, 0);
    let other = start_node(&nats, 1);
    let (mut held, _) = connect_persistent_to(home.addr(), V5, "split-sub");
    held.subscribe("split/#", QoS::AtLeastOnce);
    held.disconnect();

    nats.stop(1);
    until_connected(&other, 0);
    assert_eq!(
        persistent_connack(&other, V5, "split-sub"),
        ReasonCode::ServerUnavailable
    );
    assert_eq!(
        persistent_connack(&other, V311, "split-311"),
        ReasonCode::ServerUnavailable,
        "3.1.1: return code 3"
    );
    let (mut clean, connack) =
        connect_within_guard(&other, connect_packet(V5, "split-clean", true));
    assert_eq!(
        connack.reason_code,
        ReasonCode::Success,
        "a clean session is served"
    );
    clean.ping();
    let figures = other.cluster_figures().unwrap();
    assert!(
        figures.ownership_refused >= 2 && figures.ownership_unchecked >= 1,
        "{figures:?}"
    );
    let mut publisher = RawClient::connected_clean(home.addr(), V5, "split-pub");
    acknowledged_once_kept(&mut publisher, "split/queued");

    nats.restart(1);
    until_connected(&other, 1);
    let (mut moved, present) = admitted(&other, "split-sub");
    assert!(present, "the session came from node 0");
    let publish = next_real(&mut moved);
    assert_eq!(publish.topic(), "split/queued");
    moved.acknowledge(&publish);
    until_routed(&mut publisher, "split/p", &mut [&mut moved]);
}

/// Node 1's NATS server frozen (its connection stays open, nothing is answered): the owner
/// record is not read within 3 s and the persistent CONNECT is refused; a node with
/// `admit_unchecked_sessions = true` admits it without its session.
#[test]
fn a_persistent_session_is_refused_while_nats_does_not_answer_unless_admitting_unchecked() {
    let nats = NatsCluster::start();
    let home = start_node(&nats, 0);
    let refusing = start_node(&nats, 1);
    let admitting = start_node_with(&nats, 2, "admit_unchecked_sessions = true");
    for id in ["frozen-a", "frozen-b"] {
        let (mut held, _) = connect_persistent_to(home.addr(), V5, id);
        held.subscribe("frozen/#", QoS::AtLeastOnce);
        held.disconnect();
    }

    nats.pause(1);
    let refused = persistent_connack(&refusing, V5, "frozen-a");
    nats.resume(1);
    assert_eq!(refused, ReasonCode::ServerUnavailable);
    assert!(refusing.cluster_figures().unwrap().ownership_refused >= 1);
    let (_moved, present) = admitted(&refusing, "frozen-a");
    assert!(present, "once NATS answers the session moves");

    nats.pause(2);
    let (_client, connack) =
        connect_within_guard(&admitting, persistent_connect(V5, "frozen-b", 300));
    nats.resume(2);
    assert_eq!(connack.reason_code, ReasonCode::Success);
    assert!(!connack.session_present, "admitted without its session");
    let figures = admitting.cluster_figures().unwrap();
    assert!(
        figures.ownership_unchecked >= 1 && figures.ownership_refused == 0,
        "{figures:?}"
    );
}
