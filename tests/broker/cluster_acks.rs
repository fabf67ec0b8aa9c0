//! A publisher is never acknowledged with Success for a QoS 1/2 message JetStream did not
//! keep while NATS is connected (docs/cluster.md, "Guarantees"): a JetStream publish lost with
//! its NATS server is made again until JetStream acknowledges it, and one JetStream does not
//! acknowledge within `cluster.ack_timeout_ms` is refused (5.0: 0x80; 3.1.1: connection
//! closed).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use codec::{Packet, QoS, ReasonCode};

use crate::client::{Event, RawClient, V5, V311, persistent_connect, publish_packet};
use crate::cluster::{PROBE, start_node_with, until_routed};
use crate::harness::{TestBroker, wait_until, wait_until_within};
use crate::nats_cluster::{NatsCluster, http_get};
use ::cluster::ClusterFigures;

/// A hang guard for JetStream settling after a server left or came back, not a timing
/// assertion.
const SETTLE_GUARD: Duration = Duration::from_secs(60);
/// QoS 1 messages the publisher sends in the kill test, one every [`PACE`] (500 a second).
const COUNT: u16 = 1500;
const PACE: Duration = Duration::from_millis(2);
/// The most PUBLISHes without their PUBACK at once (under the broker's Receive Maximum).
const WINDOW: usize = 50;
/// The server is killed as message `KILL_AT` is due, right after [`BURST`] messages sent at
/// once.
const KILL_AT: u16 = COUNT / 4;
const BURST: u16 = 40;
const BURST_PAYLOAD: usize = 64 * 1024;

/// Node `name` connected to every server of `nats` (the NATS client picks one and fails over
/// to another), with `extra` `[cluster]` keys; returned once connected.
fn node_on_all_servers(nats: &NatsCluster, name: &str, extra: &str) -> TestBroker {
    let servers: Vec<String> = (0..3).map(|i| format!("\"{}\"", nats.url(i))).collect();
    let node = TestBroker::with_config(&format!(
        "[cluster]\nnode_id = \"{name}\"\nnats = [{}]\nreplicas = 3\n{extra}\n\
         [http]\nbind = \"127.0.0.1:0\"\n",
        servers.join(", ")
    ));
    wait_until(
        "a node connected to NATS, its ownership buckets open",
        || {
            let figures = node.cluster_figures()?;
            (figures.connected == 1 && figures.ownership_ready == 1).then_some(())
        },
    );
    node
}

/// The NATS server the main connection of node `name` is on.
fn server_of(nats: &NatsCluster, name: &str) -> usize {
    let client = format!("ringmq-{name}");
    wait_until("the node's NATS server found", || {
        (0..3).find(|&index| {
            let body = http_get(nats.monitor_port(index), "/connz?limit=1024");
            let parsed = body.and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok());
            parsed.is_some_and(|connz| {
                connz["connections"].as_array().is_some_and(|connections| {
                    connections
                        .iter()
                        .any(|c| c["name"].as_str() == Some(&client))
                })
            })
        })
    })
}

/// Publishes QoS 1 probes until JetStream acknowledged one (the stream is open and has a
/// leader); the node's figures then.
pub(crate) fn until_kept(publisher: &mut RawClient, node: &TestBroker) -> ClusterFigures {
    let before = node.cluster_figures().unwrap().reliable_stored;
    wait_until_within(SETTLE_GUARD, "JetStream keeps QoS 1 messages", || {
        let reason = publisher.publish_simple("acks/probe", PROBE, QoS::AtLeastOnce);
        let now = node.cluster_figures()?;
        (reason == ReasonCode::Success && now.reliable_stored > before).then_some(now)
    })
}

/// Reads what the publisher has received until `until`: each PUBACK's (or PUBREC's) reason by
/// packet id; an accepted QoS 2 message's PUBREC is answered with its PUBREL.
pub(crate) fn read_acks(
    publisher: &mut RawClient,
    acks: &mut BTreeMap<u16, ReasonCode>,
    until: Instant,
) {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match publisher.next_event(left) {
            Event::Packet(packet) => match *packet {
                Packet::PubAck(ack) => {
                    acks.insert(ack.packet_id.get(), ack.reason_code);
                }
                Packet::PubRec(rec) => {
                    if !rec.reason_code.is_error() {
                        publisher.send(&Packet::PubRel(codec::PubRel::new(rec.packet_id)));
                    }
                    acks.insert(rec.packet_id.get(), rec.reason_code);
                }
                _ => {}
            },
            Event::Closed => panic!("the 5.0 publisher was disconnected"),
            Event::Timeout => return,
        }
    }
}

/// Reads acknowledgements until fewer than [`WINDOW`] of the `sent` PUBLISHes wait for theirs.
pub(crate) fn wait_for_window(
    publisher: &mut RawClient,
    acks: &mut BTreeMap<u16, ReasonCode>,
    sent: u16,
) {
    while usize::from(sent) - acks.len() >= WINDOW {
        read_acks(publisher, acks, Instant::now() + Duration::from_millis(50));
    }
}

/// Reads acknowledgements until those of all `count` PUBLISHes came, or `guard` passed.
pub(crate) fn read_all_acks(
    publisher: &mut RawClient,
    acks: &mut BTreeMap<u16, ReasonCode>,
    count: u16,
    guard: Duration,
) {
    let guard = Instant::now() + guard;
    while acks.len() < usize::from(count) && Instant::now() < guard {
        read_acks(publisher, acks, Instant::now() + Duration::from_millis(200));
    }
}

/// What a subscriber read on a thread of its own: the ids received, and how many came again.
#[derive(Default)]
pub(crate) struct Received {
    pub(crate) ids: BTreeSet<u16>,
    pub(crate) again: usize,
}

/// Reads `subscriber`'s messages (acknowledging them) on a thread until `stop` is set or its
/// connection closes.
pub(crate) fn receive_in_background(
    mut subscriber: RawClient,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Received> {
    std::thread::spawn(move || {
        let mut received = Received::default();
        while !stop.load(Ordering::Relaxed) {
            let event = subscriber.next_event(Duration::from_millis(100));
            if matches!(event, Event::Closed) {
                break;
            }
            if let Event::Packet(packet) = event
                && let Packet::Publish(publish) = *packet
            {
                subscriber.acknowledge(&publish);
                if publish.payload() == PROBE {
                    continue;
                }
                if let Some(id) = publish.payload().first_chunk::<2>() {
                    let first = received.ids.insert(u16::from_be_bytes(*id));
                    received.again += usize::from(!first);
                }
            }
        }
        received
    })
}

/// The publishing node's NATS server is killed (SIGKILL) while a 5.0 publisher sends QoS 1 at
/// 500 a second to a persistent subscriber on another node, then started again: every message
/// whose PUBACK was Success reaches the subscriber (the JetStream publishes lost with the
/// server are made again on the server the node fails over to, and a message JetStream kept
/// but the dead server never forwarded comes through the subscriber node's replay of the
/// publishing node's messages, which the publishing node's announcement of its connection
/// loss starts: without it the subscriber's node never replays, and the test fails).
#[test]
fn every_message_acknowledged_across_a_nats_server_kill_is_delivered() {
    let mut nats = NatsCluster::start();
    let source = node_on_all_servers(&nats, "pub", "");
    let killed = server_of(&nats, "pub");
    let sink_server = (killed + 1) % 3;
    let sink = start_node_with(&nats, sink_server, "");
    let mut subscriber = RawClient::connected(sink.addr(), persistent_connect(V5, "acks-sub", 600));
    subscriber.subscribe("acks/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(source.addr(), V5, "acks-pub");
    until_routed(&mut publisher, "acks/p", &mut [&mut subscriber]);
    let before = until_kept(&mut publisher, &source);
    let sink_replays = sink.cluster_figures().unwrap().replays;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = receive_in_background(subscriber, Arc::clone(&stop));

    let mut acks = BTreeMap::new();
    let start = Instant::now();
    for n in 1..=COUNT {
        if n == KILL_AT {
            nats.stop(killed);
        }
        if n == COUNT / 2 {
            nats.restart(killed);
        }
        // Just before the kill a burst: JetStream publishes are in flight when it comes.
        let burst = (KILL_AT - BURST..KILL_AT).contains(&n);
        if !burst {
            read_acks(&mut publisher, &mut acks, start + PACE * u32::from(n));
        }
        wait_for_window(&mut publisher, &mut acks, n - 1);
        // The burst's messages are large: JetStream takes longer to keep them.
        let mut payload = n.to_be_bytes().to_vec();
        if burst {
            payload.resize(BURST_PAYLOAD, 0);
        }
        let publish = publish_packet("acks/t", &payload, QoS::AtLeastOnce, Some(n));
        publisher.send(&Packet::Publish(publish));
    }
    read_all_acks(&mut publisher, &mut acks, COUNT, SETTLE_GUARD);
    assert_eq!(acks.len(), usize::from(COUNT), "every PUBLISH answered");
    wait_until_within(
        SETTLE_GUARD,
        "the subscriber's node replayed the messages of the node that lost its server",
        || (sink.cluster_figures()?.replays > sink_replays).then_some(()),
    );
    let success: BTreeSet<u16> = acks
        .iter()
        .filter_map(|(&id, &reason)| (reason == ReasonCode::Success).then_some(id))
        .collect();
    // Every message acknowledged has reached the subscriber's node once the node's counts
    // stop moving (a hang guard, then the reader stops).
    let mut last = 0;
    wait_until_within(
        SETTLE_GUARD,
        "the subscriber's node received what it will",
        || {
            std::thread::sleep(Duration::from_secs(1));
            let now = sink.cluster_figures()?.messages_in;
            let still = now == last;
            last = now;
            still.then_some(())
        },
    );
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let Received { ids: got, again } = reader.join().unwrap();
    let lost: Vec<u16> = success.difference(&got).copied().collect();
    let figures = source.cluster_figures().unwrap();
    eprintln!(
        "kill test: {} of {COUNT} acknowledged Success, {} received, {again} twice, retries {}, given up {}, refused {}; sink {:?}",
        success.len(),
        got.len(),
        figures.reliable_retries - before.reliable_retries,
        figures.reliable_failures - before.reliable_failures,
        figures.acks_refused - before.acks_refused,
        sink.cluster_figures(),
    );
    assert!(
        lost.is_empty(),
        "acknowledged Success but never delivered: {lost:?}"
    );
    assert!(!success.is_empty());
}

/// The publishing node's only NATS server is frozen (SIGSTOP) longer than
/// `cluster.ack_timeout_ms`: the node stays connected but JetStream never answers, so a 5.0
/// publisher's QoS 1 and 2 messages are refused with 0x80 (never Success) and a 3.1.1
/// publisher's connection is closed without its PUBACK; once the server runs again (SIGCONT)
/// publishing works again.
#[test]
fn a_publisher_is_refused_when_jetstream_does_not_keep_its_message_in_time() {
    let nats = NatsCluster::start();
    let node = start_node_with(&nats, 0, "ack_timeout_ms = 1500");
    let mut v5 = RawClient::connected_clean(node.addr(), V5, "refused-5");
    let mut v311 = RawClient::connected_clean(node.addr(), V311, "refused-3");
    let before = until_kept(&mut v5, &node);
    until_kept(&mut v311, &node);

    nats.pause(0);
    let refused = [QoS::AtLeastOnce, QoS::ExactlyOnce, QoS::AtLeastOnce]
        .map(|qos| v5.publish_simple("acks/frozen", b"f", qos));
    let id = v311.next_packet_id();
    let publish = publish_packet("acks/frozen", b"f", QoS::AtLeastOnce, Some(id));
    closed_without_puback(&mut v311, publish);
    nats.resume(0);

    assert_eq!(
        refused,
        [ReasonCode::UnspecifiedError; 3],
        "5.0: refused, never Success"
    );
    let figures = node.cluster_figures().unwrap();
    assert!(
        figures.acks_refused >= before.acks_refused + 4,
        "{figures:?}"
    );
    assert!(
        figures.reliable_failures > before.reliable_failures,
        "{figures:?}"
    );
    // Publishing works again once JetStream answers (a hang guard, not a timing assertion).
    until_kept(&mut v5, &node);
    until_kept_on_new_connections(V311, &node);
}

/// [`until_kept`] with a new connection of `protocol` for each probe: a 3.1.1 probe JetStream
/// does not keep in time closes its connection (right after a NATS server resumes, the stream
/// may not answer at once).
fn until_kept_on_new_connections(protocol: codec::ProtocolVersion, node: &TestBroker) {
    let before = node.cluster_figures().unwrap().reliable_stored;
    wait_until_within(SETTLE_GUARD, "JetStream keeps QoS 1 messages", || {
        let mut publisher = RawClient::connected_clean(node.addr(), protocol, "kept-again");
        let id = publisher.next_packet_id();
        let probe = publish_packet("acks/probe", PROBE, QoS::AtLeastOnce, Some(id));
        publisher.send(&Packet::Publish(probe));
        let acked = loop {
            match publisher.next_event(SETTLE_GUARD) {
                Event::Packet(packet) => {
                    if let Packet::PubAck(ack) = *packet {
                        break ack.reason_code == ReasonCode::Success;
                    }
                }
                Event::Closed | Event::Timeout => break false,
            }
        };
        let now = node.cluster_figures()?;
        (acked && now.reliable_stored > before).then_some(())
    });
}

/// Sends a 3.1.1 client's QoS 1 `publish`, which the broker must refuse by closing the
/// connection without its PUBACK (3.1.1 has no negative acknowledgement).
pub(crate) fn closed_without_puback(client: &mut RawClient, publish: codec::Publish) {
    client.send(&Packet::Publish(publish));
    let before_close = client.expect_closed();
    assert!(
        !before_close.iter().any(|p| matches!(p, Packet::PubAck(_))),
        "3.1.1: closed without a PUBACK: {before_close:?}"
    );
}

/// The messages the stream `ringmq_messages` holds, as server `index` reports them.
fn stream_messages(nats: &NatsCluster, index: usize) -> Option<u64> {
    let body = http_get(nats.monitor_port(index), "/jsz?streams=true")?;
    let jsz = serde_json::from_str::<serde_json::Value>(&body).ok()?;
    jsz["account_details"]
        .as_array()?
        .iter()
        .find_map(|account| {
            let streams = account["stream_detail"].as_array()?;
            let stream = streams
                .iter()
                .find(|s| s["name"].as_str() == Some("ringmq_messages"))?;
            stream["state"]["messages"].as_u64()
        })
}

/// Publishes JetStream did not acknowledge in time (the publishing node's server frozen for
/// longer than one try, shorter than `ack_timeout_ms`) are made again: once the server runs
/// again both copies reach JetStream and the subscriber's node, and each message is kept once
/// (the stream's duplicate window) and delivered once (the node's duplicate check).
#[test]
fn a_message_published_again_is_kept_and_delivered_once() {
    let nats = NatsCluster::start();
    let source = start_node_with(&nats, 0, "");
    let sink = start_node_with(&nats, 1, "");
    let mut subscriber = RawClient::connected_clean(sink.addr(), V5, "once-sub");
    subscriber.subscribe("once/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(source.addr(), V5, "once-pub");
    until_routed(&mut publisher, "once/p", &mut [&mut subscriber]);
    let before = until_kept(&mut publisher, &source);
    let kept_before = wait_until("the stream's count", || stream_messages(&nats, 1));

    nats.pause(0);
    for n in 1..=5u16 {
        let publish = publish_packet("once/t", &n.to_be_bytes(), QoS::AtLeastOnce, Some(n));
        publisher.send(&Packet::Publish(publish));
    }
    wait_until_within(SETTLE_GUARD, "the publishes made again", || {
        let figures = source.cluster_figures()?;
        (figures.reliable_retries >= before.reliable_retries + 5).then_some(())
    });
    nats.resume(0);
    let mut acks = BTreeMap::new();
    let guard = Instant::now() + SETTLE_GUARD;
    while acks.len() < 5 && Instant::now() < guard {
        read_acks(
            &mut publisher,
            &mut acks,
            Instant::now() + Duration::from_millis(200),
        );
    }
    assert!(
        acks.len() == 5 && acks.values().all(|&r| r == ReasonCode::Success),
        "{acks:?}"
    );
    let mut got = Vec::new();
    while let Event::Packet(packet) = subscriber.next_event(Duration::from_secs(2)) {
        if let Packet::Publish(publish) = *packet {
            subscriber.acknowledge(&publish);
            if publish.payload() != PROBE {
                got.push(publish.payload().to_vec());
            }
        }
    }
    let sent: Vec<Vec<u8>> = (1..=5u16).map(|n| n.to_be_bytes().to_vec()).collect();
    assert_eq!(got, sent, "each message once, in order");
    let kept = stream_messages(&nats, 1).unwrap();
    assert_eq!(kept, kept_before + 5, "the stream keeps each message once");
}

/// QoS 1 messages each of three publishers sends at once in the queue test.
const PER_PUBLISHER: u16 = 800;

/// With `max_outbound_messages = 1`, three publishers send 800 QoS 1 messages each at once
/// (a shard hands a read's PUBLISHes over in one turn, faster than the cluster thread takes
/// them): those that do not fit are refused with 0x97 Quota exceeded, no more are acknowledged
/// with Success than JetStream kept, and every publisher's acknowledgements still leave in the
/// order of its PUBLISHes.
#[test]
fn a_message_beyond_the_queue_to_nats_is_refused_in_its_turn() {
    let nats = NatsCluster::start();
    let node = start_node_with(
        &nats,
        0,
        "max_outbound_messages = 1\nack_timeout_ms = 30000",
    );
    let mut publishers: Vec<RawClient> = (0..3)
        .map(|i| RawClient::connected_clean(node.addr(), V5, &format!("full-{i}")))
        .collect();
    let before = until_kept(&mut publishers[0], &node);

    for publisher in &mut publishers {
        for n in 1..=PER_PUBLISHER {
            let publish = publish_packet("full/t", b"m", QoS::AtLeastOnce, Some(n));
            publisher.send(&Packet::Publish(publish));
        }
    }
    let (mut refused, mut success) = (0, 0);
    for publisher in &mut publishers {
        let mut order = Vec::new();
        let guard = Instant::now() + SETTLE_GUARD;
        while order.len() < usize::from(PER_PUBLISHER) && Instant::now() < guard {
            if let Event::Packet(packet) = publisher.next_event(Duration::from_millis(200))
                && let Packet::PubAck(ack) = *packet
            {
                order.push((ack.packet_id.get(), ack.reason_code));
            }
        }
        let ids: Vec<u16> = order.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, (1..=PER_PUBLISHER).collect::<Vec<_>>(), "in order");
        let other = order.iter().find(|(_, r)| {
            !matches!(
                r,
                ReasonCode::Success | ReasonCode::QuotaExceeded | ReasonCode::UnspecifiedError
            )
        });
        assert_eq!(other, None, "an unexpected reason");
        success += order
            .iter()
            .filter(|(_, r)| *r == ReasonCode::Success)
            .count();
        refused += order
            .iter()
            .filter(|(_, r)| *r == ReasonCode::QuotaExceeded)
            .count();
    }
    let figures = node.cluster_figures().unwrap();
    eprintln!("queue test: {success} Success, {refused} refused with 0x97; {figures:?}");
    assert!(refused > 0);
    let kept = figures.reliable_stored - before.reliable_stored;
    assert!(success as u64 <= kept, "Success for a message not kept");
    assert!(figures.acks_refused - before.acks_refused >= refused as u64);
    assert!(figures.dropped_queue_full > before.dropped_queue_full);
}
