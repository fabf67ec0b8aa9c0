//! The bounds a TCP client meets hold over QUIC (issue 51): a client that never completes its
//! CONNECT is closed at `connection.connect_timeout` (what it sent counts as pre-login bytes,
//! as on TCP), and a shard holds at most `max_connections_per_shard` QUIC connections.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use bytes::BytesMut;
use codec::Packet;

use crate::client::{V5, connect_packet};
use crate::harness::TestBroker;
use crate::ops::scrape_until;
use crate::quic::quic_client::{Pki, QuicClient};

/// A broker with one shard and a QUIC listener with `quic_keys` added, and `extra` TOML.
fn broker(pki: &Pki, quic_keys: &str, extra: &str) -> TestBroker {
    TestBroker::with_config(&format!(
        "[runtime]\nshards = 1\n[http]\nbind = \"127.0.0.1:0\"\n{extra}\n\
         [[listeners.quic]]\nbind = \"127.0.0.1:0\"\ncert = \"{}\"\nkey = \"{}\"\n{quic_keys}\n",
        pki.cert.display(),
        pki.key.display()
    ))
}

#[test]
fn a_quic_client_that_sends_half_a_connect_is_closed_at_the_connect_timeout() {
    let pki = Pki::new();
    // The QUIC idle timeout (60 s) is far beyond the test's wait: only the CONNECT deadline
    // can close the connection in time.
    let broker = broker(&pki, "", "[connection]\nconnect_timeout = 1\n");
    let mut connect = BytesMut::new();
    let packet = Packet::Connect(Box::new(connect_packet(V5, "slow-starter", true)));
    codec::encode(&packet, V5, &mut connect).unwrap();

    let mut quic = QuicClient::connect(broker.addr_of("quic"), &pki);
    quic.open_stream();
    quic.write_all(&connect[..connect.len() / 2]);
    quic.drive_until("the broker closes the connection", || false);
    assert!(quic.is_lost(), "closed by the broker");
    scrape_until(&broker, "no QUIC client left", |s| {
        s.value("ringmq_listener_connections_open", &[("listener", "quic")]) == Some(0.0)
    });
}

#[test]
fn a_shard_refuses_quic_connections_beyond_max_connections_per_shard() {
    let pki = Pki::new();
    let broker = broker(&pki, "max_connections_per_shard = 2", "");
    let mut held: Vec<QuicClient> = (0..2)
        .map(|_| QuicClient::connect(broker.addr_of("quic"), &pki))
        .collect();
    for client in &mut held {
        assert!(client.handshake_ok(), "within the bound");
    }
    let mut third = QuicClient::connect(broker.addr_of("quic"), &pki);
    assert!(!third.handshake_ok(), "the third is refused");
    scrape_until(&broker, "the refusal counted", |s| {
        s.value("ringmq_quic_refused_total", &[]) == Some(1.0)
    });
    // One that ends makes room.
    held.pop().unwrap().close();
    let mut fourth = QuicClient::connect(broker.addr_of("quic"), &pki);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !fourth.handshake_ok() {
        // The closed connection drains first (three probe timeouts): try again until then.
        assert!(std::time::Instant::now() < deadline, "room made by a close");
        std::thread::sleep(std::time::Duration::from_millis(100));
        fourth = QuicClient::connect(broker.addr_of("quic"), &pki);
    }
}
