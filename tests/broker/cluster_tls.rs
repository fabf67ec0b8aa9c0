//! `[cluster]` over TLS (docs/cluster.md, "Security"): two nodes reach a NATS server that
//! speaks only TLS and verifies client certificates, with the CA and client certificate the
//! test made; a node without a client certificate is refused by NATS, keeps serving its own
//! clients, and counts their client ids as unchecked.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use codec::QoS;

use crate::client::{RawClient, V5};
use crate::cluster::{is_probe, until_routed};
use crate::harness::{TestBroker, wait_until};
use crate::nats_cluster::NatsCluster;
use crate::pki::TestPki;

/// A node on `url`, trusting `pki`'s CA, with `client_keys` (TOML) for its certificate.
fn tls_node(index: usize, url: &str, pki: &TestPki, client_keys: &str) -> TestBroker {
    TestBroker::with_config(&format!(
        "[cluster]\nnode_id = \"t{index}\"\nnats = [\"{url}\"]\ntls_ca_file = {:?}\n{client_keys}",
        pki.ca.cert.display().to_string()
    ))
}

#[test]
fn nodes_reach_each_other_over_tls_with_client_certificates() {
    let pki = TestPki::new();
    let nats = NatsCluster::start_tls(&pki.ca.cert, (&pki.server.cert, &pki.server.key));
    let url = nats.url(0);
    let nodes: Vec<TestBroker> = (0..2)
        .map(|index| {
            let client = pki.ca.client(pki.dir.path(), &format!("node{index}"));
            let keys = format!(
                "tls_cert_file = {:?}\ntls_key_file = {:?}\n",
                client.cert.display().to_string(),
                client.key.display().to_string()
            );
            tls_node(index, &url, &pki, &keys)
        })
        .collect();
    for node in &nodes {
        wait_until("a node connected to NATS over TLS", || {
            (node.cluster_figures()?.connected == 1).then_some(())
        });
    }
    let mut subscriber = RawClient::connected_clean(nodes[1].addr(), V5, "tls-sub");
    subscriber.subscribe("secure/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(nodes[0].addr(), V5, "tls-pub");
    until_routed(&mut publisher, "secure/p", &mut [&mut subscriber]);
    publisher.publish_simple("secure/x", b"sealed", QoS::AtLeastOnce);
    let got = loop {
        let publish = subscriber.expect_publish();
        subscriber.acknowledge(&publish);
        if !is_probe(&publish) {
            break publish;
        }
    };
    assert_eq!(got.payload(), b"sealed");
}

#[test]
fn a_node_without_a_client_certificate_is_refused_and_serves_alone() {
    let pki = TestPki::new();
    let nats = NatsCluster::start_tls(&pki.ca.cert, (&pki.server.cert, &pki.server.key));
    let node = tls_node(0, &nats.url(0), &pki, "");
    // Long enough for many refused handshakes (each takes milliseconds on loopback).
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(node.cluster_figures().unwrap().connected, 0);
    // Its own clients are still served; their client ids are not checked across nodes.
    let mut client = RawClient::connected_clean(node.addr(), V5, "alone");
    client.subscribe("alone/#", QoS::AtMostOnce);
    client.publish_simple("alone/1", b"here", QoS::AtMostOnce);
    assert_eq!(client.expect_publish().payload(), b"here");
    assert!(node.cluster_figures().unwrap().ownership_unchecked >= 1);
}
