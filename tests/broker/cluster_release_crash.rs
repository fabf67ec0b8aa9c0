//! A node killed right after it released a session to another node, before its reply
//! reached that node (docs/cluster.md, "Sessions across nodes"; issue 48): the claiming node
//! refuses the CONNECT (0x88) and holds nothing, so the session is only where it was stored.
//! The releasing node keeps its stored copy until the owner record names the claiming node,
//! and its next start resumes the session with its queue. Once the claiming node does own it,
//! the copy goes from the releasing node's store.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use codec::{Packet, ProtocolVersion, QoS, ReasonCode};

use crate::client::{Event, RawClient, persistent_connect};
use crate::cluster::start_node;
use crate::cluster_sessions::{
    next_real, reconnect_once_released_at, reconnect_once_released_with, wait_for_metric,
};
use crate::faults::relay::{Mode, Relay};
use crate::nats_cluster::NatsCluster;
use crate::ports::free_port;
use crate::process::BrokerProcess;

const V5: ProtocolVersion = ProtocolVersion::V5;
const ID: &str = "released-then-killed";
/// How late node 0's link to NATS forwards each chunk while the claim runs: its reply to the
/// release request comes after the claim's 3 s wait for it.
const SLOW_LINK: Duration = Duration::from_millis(2500);
/// Queued for the session before the move.
const QUEUED: usize = 3;

/// Node 0 (a real process with a redb store, reaching NATS through a relay) holds an offline
/// session with 3 queued QoS 1 messages. Its link is slowed; the client connects to node 1,
/// whose claim asks node 0 to release the session; node 0 releases it, and is killed (its
/// link cut) before the reply is through. Started again on its store, node 0 still has the
/// session: the client resumes it there (Session Present 1) with its 3 messages. The client
/// then moves to node 1 (Session Present 1); node 0's store no longer holds the session after
/// that: a broker started on that store alone gives the client id Session Present 0.
#[test]
fn a_node_killed_after_releasing_a_session_still_has_it_at_its_next_start() {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let relay = relay_to(&nats);
    let http = free_port();
    let config = node_config(&relay, work.path(), http);
    let config_path = work.path().join("n0.toml");
    let first_run = BrokerProcess::start(&config, &config_path);
    wait_for_metric(http, "ringmq_cluster_ownership_ready", 1);
    let claiming = start_node(&nats, 1);
    offline_session_with_queue(first_run.addr);

    relay.set(Mode::Slow(SLOW_LINK));
    let claim_addr = claiming.addr();
    let claim = std::thread::spawn(move || connack_of(claim_addr));
    wait_for_metric(http, "ringmq_cluster_sessions_released_total", 1);
    relay.set(Mode::Cut);
    let addr = first_run.addr;
    first_run.kill_9();
    let refused = claim.join().unwrap();
    assert_ne!(
        refused,
        Some(ReasonCode::Success),
        "the claim had no reply from the node that released the session"
    );

    relay.set(Mode::Open);
    let mut second_run = BrokerProcess::start_on(addr, &config, &config_path);
    second_run.wait_serving();
    let (client, present) = reconnect_once_released_at(addr, V5, ID);
    assert!(
        present,
        "the session came back from the releasing node's store"
    );
    take_queued(client);

    // Moved to node 1 now, with node 0's link open: node 0's stored copy goes once node 1
    // owns the session (node 0 reads the owner record each second).
    let (client, present) = reconnect_once_released_with(&claiming, V5, ID);
    assert!(present);
    client.disconnect();
    std::thread::sleep(Duration::from_secs(4));
    second_run.kill_9();
    assert!(
        !present_on_store_alone(work.path()),
        "the stored copy was removed once node 1 owned the session"
    );
}

/// Takes the [`QUEUED`] messages (others may come twice: QoS 1) and disconnects.
fn take_queued(mut client: RawClient) {
    let mut taken = BTreeSet::new();
    for _ in 0..QUEUED * 4 {
        let publish = next_real(&mut client);
        client.acknowledge(&publish);
        taken.insert(publish.payload().to_vec());
        if taken.len() == QUEUED {
            return client.disconnect();
        }
    }
    panic!("the queued messages did not all come: {taken:?}");
}

/// A relay to NATS server 0.
fn relay_to(nats: &NatsCluster) -> Relay {
    let url = nats.url(0);
    let port = url.rsplit(':').next().and_then(|p| p.parse().ok());
    Relay::start(([127, 0, 0, 1], port.expect("a NATS port")).into())
}

/// Node 0 through `relay`, a redb store under `dir`, its operations listener on `http`.
fn node_config(relay: &Relay, dir: &Path, http: u16) -> String {
    format!(
        "[cluster]\nnode_id = \"n0\"\nnats = [\"nats://{}\"]\nreplicas = 3\n\
         [http]\nbind = \"127.0.0.1:{http}\"\n[persistence]\nengine = \"redb\"\ndir = \"{}\"\n",
        relay.addr(),
        dir.join("store").display()
    )
}

/// [`ID`]'s persistent session on the node at `addr`, subscribed to `moved/#` at QoS 1 and
/// offline, with [`QUEUED`] messages queued (published there, each acknowledged).
fn offline_session_with_queue(addr: std::net::SocketAddr) {
    let (mut client, connack) = RawClient::connect(addr, persistent_connect(V5, ID, 300));
    assert_eq!(connack.reason_code, ReasonCode::Success);
    client.subscribe("moved/#", QoS::AtLeastOnce);
    client.disconnect();
    let mut publisher = RawClient::connected_clean(addr, V5, "released-pub");
    for i in 0..QUEUED {
        let payload = format!("m{i}");
        let reason = publisher.publish_simple("moved/x", payload.as_bytes(), QoS::AtLeastOnce);
        assert_eq!(reason, ReasonCode::Success);
    }
}

/// The reason code of [`ID`]'s persistent CONNECT to `addr`; `None` without a CONNACK within
/// 20 s.
fn connack_of(addr: std::net::SocketAddr) -> Option<ReasonCode> {
    let mut client = RawClient::open(addr, V5);
    client.send(&Packet::from(persistent_connect(V5, ID, 300)));
    match client.next_event(Duration::from_secs(20)) {
        Event::Packet(packet) => match *packet {
            Packet::ConnAck(connack) => Some(connack.reason_code),
            _ => None,
        },
        _ => None,
    }
}

/// Whether a single broker started on node 0's store (under `dir`) resumes [`ID`]'s session.
fn present_on_store_alone(dir: &Path) -> bool {
    let config = format!(
        "[persistence]\nengine = \"redb\"\ndir = \"{}\"\n",
        dir.join("store").display()
    );
    let mut alone = BrokerProcess::start(&config, &dir.join("alone.toml"));
    alone.wait_serving();
    let (client, connack) = RawClient::connect(alone.addr, persistent_connect(V5, ID, 300));
    assert_eq!(connack.reason_code, ReasonCode::Success);
    client.disconnect();
    connack.session_present
}
