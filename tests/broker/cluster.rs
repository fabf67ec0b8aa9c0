//! `[cluster]`: three RingMQ nodes, each connected to a different server of a real 3-server
//! NATS cluster (tests/broker/nats_cluster.rs), exchange messages (docs/cluster.md).
//!
//! A node subscribes on NATS after the SUBACK (the link thread works in the background) and
//! NATS spreads that interest over its routes: before a test's real messages, probes (payload
//! `probe`) are published until every subscriber received one, and probes are ignored after.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use codec::{Packet, Publish, QoS};

use crate::client::{Event, ProtocolVersion, QUIET, RawClient, V5, V311};
use crate::harness::{POLL_DEADLINE, TestBroker, wait_until};
use crate::nats_cluster::{NatsCluster, http_get};

pub(crate) const PROBE: &[u8] = b"probe";

/// Three nodes on three NATS servers (the nodes drop first).
pub(crate) struct Cluster {
    pub(crate) nodes: Vec<TestBroker>,
    pub(crate) nats: NatsCluster,
}

pub(crate) fn start_cluster() -> Cluster {
    let nats = NatsCluster::start();
    let nodes: Vec<TestBroker> = (0..3).map(|index| start_node(&nats, index)).collect();
    Cluster { nodes, nats }
}

/// Node `n<index>` on NATS server `index`, its buckets kept on all three servers; returned once
/// connected to NATS.
pub(crate) fn start_node(nats: &NatsCluster, index: usize) -> TestBroker {
    start_node_with(nats, index, "")
}

/// [`start_node`] with `extra` keys in its `[cluster]` section.
pub(crate) fn start_node_with(nats: &NatsCluster, index: usize, extra: &str) -> TestBroker {
    let node = TestBroker::with_config(&format!(
        "[cluster]\nnode_id = \"n{index}\"\nnats = [\"{}\"]\nreplicas = 3\n{extra}\n\
         [http]\nbind = \"127.0.0.1:0\"\n",
        nats.url(index)
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

impl Cluster {
    /// A clean-session client `id` on node `node`, subscribed to `filters` at QoS 1.
    pub(crate) fn client(
        &self,
        node: usize,
        protocol: ProtocolVersion,
        id: &str,
        filters: &[&str],
    ) -> RawClient {
        let mut client = RawClient::connected_clean(self.nodes[node].addr(), protocol, id);
        for filter in filters {
            client.subscribe(filter, QoS::AtLeastOnce);
        }
        client
    }
}

pub(crate) fn is_probe(publish: &Publish) -> bool {
    publish.payload() == PROBE
}

/// Publishes probes on `topic` until each of `subscribers` received one.
pub(crate) fn until_routed(
    publisher: &mut RawClient,
    topic: &str,
    subscribers: &mut [&mut RawClient],
) {
    let deadline = Instant::now() + POLL_DEADLINE;
    let mut reached = vec![false; subscribers.len()];
    while reached.contains(&false) {
        assert!(
            Instant::now() < deadline,
            "probes on {topic} never reached every subscriber"
        );
        publisher.publish_simple(topic, PROBE, QoS::AtMostOnce);
        for (index, subscriber) in subscribers.iter_mut().enumerate() {
            while let Event::Packet(packet) = subscriber.next_event(Duration::from_millis(20)) {
                if let Packet::Publish(publish) = *packet {
                    subscriber.acknowledge(&publish);
                    reached[index] |= is_probe(&publish);
                }
            }
        }
    }
}

/// The next PUBLISH that is not a probe (acknowledged).
pub(crate) fn next_message(client: &mut RawClient) -> Publish {
    loop {
        let publish = client.expect_publish();
        client.acknowledge(&publish);
        if !is_probe(&publish) {
            return publish;
        }
    }
}

/// Fails if a PUBLISH other than a probe arrives within [`QUIET`].
pub(crate) fn expect_no_message(client: &mut RawClient) {
    let deadline = Instant::now() + QUIET;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        match client.next_event(left) {
            Event::Timeout => return,
            Event::Packet(packet) => match *packet {
                Packet::Publish(publish) => {
                    client.acknowledge(&publish);
                    assert!(is_probe(&publish), "unexpected {publish:?}");
                }
                other => panic!("unexpected {other:?}"),
            },
            Event::Closed => panic!("connection closed"),
        }
    }
}

/// A hang guard for the nodes converging on what JetStream holds (bucket records, cluster
/// totals), not a timing assertion: each record is a JetStream write kept on three NATS
/// servers, then watched by every node, and on a starved 2-core machine that took longer than
/// the harness's 10 s (the cluster totals alone take 8 to 9 s on an idle one).
pub const CONVERGENCE_GUARD: Duration = Duration::from_secs(30);

const QOS: [QoS; 3] = [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce];

/// A subscriber on node 1 gets what a publisher on node 0 sends, once, at the lower of the two
/// QoS, for every pair of QoS and both protocol versions.
#[test]
fn cross_node_publish_subscribe_at_every_qos_on_both_protocols() {
    let cluster = start_cluster();
    for (p, protocol) in [V311, V5].into_iter().enumerate() {
        let mut publisher = cluster.client(0, protocol, &format!("pub{p}"), &[]);
        let mut subscribers: Vec<RawClient> = QOS
            .iter()
            .map(|qos| {
                let id = format!("sub{p}-{}", *qos as u8);
                let mut client = RawClient::connected_clean(cluster.nodes[1].addr(), protocol, &id);
                client.subscribe(&format!("qos/{p}/{}", *qos as u8), *qos);
                client
            })
            .collect();
        for (sub_qos, subscriber) in QOS.iter().zip(subscribers.iter_mut()) {
            let topic = format!("qos/{p}/{}", *sub_qos as u8);
            until_routed(&mut publisher, &topic, &mut [&mut *subscriber]);
            for pub_qos in QOS {
                let payload = format!("m{}", pub_qos as u8);
                publisher.publish_simple(&topic, payload.as_bytes(), pub_qos);
            }
            for pub_qos in QOS {
                let got = next_message(subscriber);
                assert_eq!(got.payload(), format!("m{}", pub_qos as u8).as_bytes());
                assert_eq!(
                    got.qos,
                    pub_qos.min(*sub_qos),
                    "{topic}: published at {pub_qos:?}"
                );
            }
            expect_no_message(subscriber);
        }
    }
}

/// `+` and `#` select across nodes, `#` matches its parent level, and a message matching two
/// plain subscriptions of one node (two NATS subscriptions) reaches that node's client once.
#[test]
fn wildcards_cross_nodes_and_hash_matches_the_parent_level() {
    let cluster = start_cluster();
    let mut publisher = cluster.client(0, V5, "pub", &[]);
    let mut plus = cluster.client(1, V5, "plus", &["w/+/x"]);
    let mut hash = cluster.client(2, V311, "hash", &["w/#", "w/a/+"]);
    until_routed(&mut publisher, "w/p/x", &mut [&mut plus, &mut hash]);
    let topics = ["w", "w/a/x", "w/a/y", "w/a/x/z", "v/a/x"];
    for topic in topics {
        publisher.publish_simple(topic, topic.as_bytes(), QoS::AtLeastOnce);
    }
    assert_eq!(next_message(&mut plus).topic(), "w/a/x");
    expect_no_message(&mut plus);
    let mut got: Vec<String> = (0..4)
        .map(|_| next_message(&mut hash).topic().to_owned())
        .collect();
    got.sort();
    assert_eq!(got, ["w", "w/a/x", "w/a/x/z", "w/a/y"]);
    expect_no_message(&mut hash);
}

/// A shared subscription with members on two nodes: each message goes to exactly one member
/// cluster-wide, while a plain subscriber on one of those nodes gets every message once;
/// published on a node without a member, then on a member's node (whose member takes part in
/// NATS's choice like the others: no second copy from the publishing node).
#[test]
fn a_shared_subscription_across_nodes_delivers_each_message_once() {
    let cluster = start_cluster();
    let mut members: Vec<RawClient> = (0..2)
        .map(|node| cluster.client(node, V5, &format!("m{node}"), &["$share/g/sh/#"]))
        .collect();
    let mut plain = cluster.client(1, V5, "plain", &["sh/#"]);
    for publisher_node in [2, 0] {
        let mut publisher =
            cluster.client(publisher_node, V5, &format!("pub{publisher_node}"), &[]);
        {
            let (first, second) = members.split_at_mut(1);
            until_routed(
                &mut publisher,
                "sh/p",
                &mut [&mut first[0], &mut second[0], &mut plain],
            );
        }
        let topics: Vec<String> = (0..20)
            .map(|i| format!("sh/{publisher_node}/{i}"))
            .collect();
        for topic in &topics {
            publisher.publish_simple(topic, b"m", QoS::AtLeastOnce);
        }
        each_once_to_plain_and_one_member(&topics, &mut plain, &mut members);
    }
}

/// `plain` gets each of `topics` once, and each reaches exactly one of `members`.
fn each_once_to_plain_and_one_member(
    topics: &[String],
    plain: &mut RawClient,
    members: &mut [RawClient],
) {
    let mut plain_got: Vec<String> = (0..topics.len())
        .map(|_| next_message(plain).topic().to_owned())
        .collect();
    plain_got.sort();
    plain_got.dedup();
    assert_eq!(
        plain_got.len(),
        topics.len(),
        "the plain subscriber got each message once"
    );
    expect_no_message(plain);
    // Every message reached one member: count them as they come, from both.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let deadline = Instant::now() + POLL_DEADLINE;
    while seen.values().sum::<usize>() < topics.len() {
        assert!(Instant::now() < deadline, "members got only {seen:?}");
        for member in members.iter_mut() {
            if let Event::Packet(packet) = member.next_event(Duration::from_millis(20))
                && let Packet::Publish(publish) = *packet
            {
                member.acknowledge(&publish);
                if !is_probe(&publish) {
                    *seen.entry(publish.topic().to_owned()).or_default() += 1;
                }
            }
        }
    }
    for member in members.iter_mut() {
        expect_no_message(member);
    }
    assert_eq!(seen.len(), topics.len(), "{seen:?}");
    assert!(
        seen.values().all(|n| *n == 1),
        "a message reached two members: {seen:?}"
    );
}

/// A node never receives its own publishes back from NATS: its local subscriber gets each
/// message once, the remote one too, and the node counts nothing in from the cluster.
#[test]
fn a_node_does_not_receive_its_own_publishes_back() {
    let cluster = start_cluster();
    let mut publisher = cluster.client(0, V5, "pub", &[]);
    let mut local = cluster.client(0, V5, "local", &["loop/#"]);
    let mut remote = cluster.client(1, V5, "remote", &["loop/#"]);
    until_routed(&mut publisher, "loop/p", &mut [&mut local, &mut remote]);
    for index in 0..5 {
        publisher.publish_simple(&format!("loop/{index}"), b"m", QoS::AtLeastOnce);
    }
    for subscriber in [&mut local, &mut remote] {
        let mut got: Vec<String> = (0..5)
            .map(|_| next_message(subscriber).topic().to_owned())
            .collect();
        got.sort();
        assert_eq!(got, ["loop/0", "loop/1", "loop/2", "loop/3", "loop/4"]);
        expect_no_message(subscriber);
    }
    let figures = cluster.nodes[0].cluster_figures().unwrap();
    assert_eq!(figures.messages_in, 0, "{figures:?}");
    assert!(figures.messages_out >= 5, "{figures:?}");
    let metrics = http_get(cluster.nodes[0].http_addr().port(), "/metrics").unwrap();
    assert_eq!(
        metric(&metrics, "ringmq_cluster_messages_in_total"),
        Some(0)
    );
    assert!(metric(&metrics, "ringmq_cluster_messages_out_total") >= Some(5));
    assert_eq!(metric(&metrics, "ringmq_cluster_connected"), Some(1));
}

/// The value of the unlabelled sample `name` in a `/metrics` document.
pub(crate) fn metric(document: &str, name: &str) -> Option<u64> {
    document.lines().find_map(|line| {
        let (key, value) = line.split_once(' ')?;
        (key == name).then(|| value.trim().parse().ok())?
    })
}

/// The subjects server `index` holds subscriptions on for the client named `name`.
fn subscriptions_of(cluster: &Cluster, index: usize, name: &str) -> Option<Vec<String>> {
    let body = http_get(cluster.nats.monitor_port(index), "/connz?subs=1")?;
    let connz: serde_json::Value = serde_json::from_str(&body).ok()?;
    let connection = connz["connections"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)?;
    let subjects = connection["subscriptions_list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Some(
        subjects
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect(),
    )
}

/// After the last local subscriber of a filter unsubscribes, the node drops its NATS
/// subscription and nothing more comes for it: a later fence message arrives alone.
#[test]
fn unsubscribe_stops_the_flow() {
    let cluster = start_cluster();
    let mut publisher = cluster.client(0, V5, "pub", &[]);
    let mut subscriber = cluster.client(1, V5, "sub", &["u/#", "fence"]);
    until_routed(&mut publisher, "u/p", &mut [&mut subscriber]);
    until_routed(&mut publisher, "fence", &mut [&mut subscriber]);
    publisher.publish_simple("u/x", b"before", QoS::AtLeastOnce);
    assert_eq!(next_message(&mut subscriber).payload(), b"before");
    subscriber.unsubscribe("u/#");
    wait_until("node 1's NATS subscriptions for u/# dropped", || {
        let subjects = subscriptions_of(&cluster, 1, "ringmq-n1")?;
        (!subjects.is_empty() && subjects.iter().all(|s| !s.starts_with("ringmq.msg.u")))
            .then_some(())
    });
    let before = cluster.nodes[1].cluster_figures().unwrap().messages_in;
    for _ in 0..5 {
        publisher.publish_simple("u/x", b"after", QoS::AtLeastOnce);
    }
    publisher.publish_simple("fence", b"fence", QoS::AtLeastOnce);
    assert_eq!(next_message(&mut subscriber).payload(), b"fence");
    wait_until("the fence counted in", || {
        let after = cluster.nodes[1].cluster_figures()?.messages_in;
        (after > before).then_some(())
    });
    let after = cluster.nodes[1].cluster_figures().unwrap().messages_in;
    assert_eq!(after - before, 1, "only the fence came from the cluster");
    expect_no_message(&mut subscriber);
}

/// A node without `[cluster]` has no link and works alone; the cluster's messages do not
/// reach it.
#[test]
fn a_node_without_cluster_is_unaffected() {
    let cluster = start_cluster();
    let single = TestBroker::with_config("[http]\nbind = \"127.0.0.1:0\"\n");
    assert!(single.cluster_figures().is_none());
    let metrics = http_get(single.http_addr().port(), "/metrics").unwrap();
    assert!(metrics.contains("ringmq_messages"), "{metrics}");
    assert!(!metrics.contains("ringmq_cluster_"), "{metrics}");
    let mut subscriber = RawClient::connected_clean(single.addr(), V5, "sub");
    subscriber.subscribe("s/#", QoS::AtLeastOnce);
    let mut remote = cluster.client(1, V5, "remote", &["s/#"]);
    let mut publisher = cluster.client(0, V5, "pub", &[]);
    until_routed(&mut publisher, "s/p", &mut [&mut remote]);
    publisher.publish_simple("s/1", b"cluster", QoS::AtLeastOnce);
    assert_eq!(next_message(&mut remote).payload(), b"cluster");
    let mut local = RawClient::connected_clean(single.addr(), V311, "local");
    local.publish_simple("s/2", b"single", QoS::AtLeastOnce);
    assert_eq!(next_message(&mut subscriber).payload(), b"single");
    expect_no_message(&mut subscriber);
}

/// With NATS down and `cluster.ack_while_disconnected` set (the default waits for JetStream:
/// `cluster_down.rs`), a node still acknowledges its publishers and serves its local subscribers;
/// what is for the cluster waits in its bounded queue (`cluster.max_outbound_messages`, here 3,
/// and the one the link had taken), the rest is dropped and counted, and the waiting messages
/// are sent once NATS is back. (Whether another node receives them depends on its interest
/// being back in NATS first: NATS core, at most once; docs/cluster.md.)
#[test]
fn with_nats_down_messages_wait_in_a_bounded_queue_and_are_sent_when_it_returns() {
    let mut nats = NatsCluster::start();
    let buffered = start_node_with(
        &nats,
        0,
        "max_outbound_messages = 3\nack_while_disconnected = true",
    );
    let remote = start_node(&nats, 1);
    let mut local = RawClient::connected_clean(buffered.addr(), V5, "local");
    local.subscribe("down/#", QoS::AtLeastOnce);
    let mut far = RawClient::connected_clean(remote.addr(), V5, "far");
    far.subscribe("down/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(buffered.addr(), V5, "pub");
    until_routed(&mut publisher, "down/p", &mut [&mut local, &mut far]);
    nats.stop_all();
    wait_until("node 0 disconnected from NATS", || {
        (buffered.cluster_figures()?.connected == 0).then_some(())
    });
    let sent_before = buffered.cluster_figures().unwrap().messages_out;
    for index in 0..5 {
        let reason = publisher.publish_simple(&format!("down/{index}"), b"m", QoS::AtLeastOnce);
        assert_eq!(reason, codec::ReasonCode::Success);
        assert_eq!(next_message(&mut local).topic(), format!("down/{index}"));
    }
    let figures = buffered.cluster_figures().unwrap();
    assert_eq!(
        figures.dropped_queue_full, 1,
        "four wait, one did not fit: {figures:?}"
    );
    assert_eq!(figures.messages_out, sent_before, "nothing sent while down");
    assert!(figures.nats_disconnects >= 1, "{figures:?}");
    nats.restart_all();
    wait_until("the four waiting messages sent", || {
        let figures = buffered.cluster_figures()?;
        (figures.messages_out == sent_before + 4).then_some(())
    });
    let figures = buffered.cluster_figures().unwrap();
    assert_eq!(figures.dropped_disconnected, 0, "{figures:?}");
    // The flow is back across nodes.
    until_routed(&mut publisher, "down/again", &mut [&mut far]);
}
