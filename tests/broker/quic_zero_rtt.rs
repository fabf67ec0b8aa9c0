//! 0-RTT over QUIC (issue 51): a client that resumes sends its CONNECT and PUBLISH packets in
//! its first flight. The broker acts before the handshake completes only on the packets that
//! are harmless when handled twice (`crates/transport/src/quic/early.rs`); its resumption
//! tickets are single-use, so a first flight replayed after the client's own use gets no
//! 0-RTT at all, and a copy sent ahead of the client gets only the replay-safe packets handled.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::net::UdpSocket;
use std::time::Duration;

use bytes::BytesMut;
use codec::{Packet, QoS, ReasonCode};
use quinn_proto::ClientConfig;

use crate::client::{RawClient, V5, connect_packet, publish_packet};
use crate::harness::TestBroker;
use crate::ops::scrape_until;
use crate::quic::quic_client::{Pki, QuicClient};
use crate::quic::{MqttOverQuic, broker};

/// How long a delivery that must not happen is waited for.
const SILENCE: Duration = Duration::from_millis(600);

fn encoded(packets: &[Packet]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for packet in packets {
        codec::encode(packet, V5, &mut out).expect("test packet encodes");
    }
    out.to_vec()
}

/// CONNECT (clean start, no Will), a QoS 1 PUBLISH to `{prefix}/one` (id 1) and a QoS 0
/// PUBLISH to `{prefix}/zero`: the first two are replay-safe, the third is not.
fn first_packets(client_id: &str, prefix: &str) -> Vec<u8> {
    encoded(&[
        Packet::Connect(Box::new(connect_packet(V5, client_id, true))),
        Packet::Publish(publish_packet(
            &format!("{prefix}/one"),
            b"at least once",
            QoS::AtLeastOnce,
            Some(1),
        )),
        Packet::Publish(publish_packet(
            &format!("{prefix}/zero"),
            b"at most once",
            QoS::AtMostOnce,
            None,
        )),
    ])
}

/// A full handshake and an MQTT session with `config`, so that it holds the broker's
/// resumption tickets (they come after the handshake; a PING round trip waits for them).
fn take_tickets(broker: &TestBroker, config: &ClientConfig) {
    let quic = QuicClient::connect_with(broker.addr_of("quic"), "localhost", config.clone());
    let mut client = MqttOverQuic::over(quic);
    client.quic.open_stream();
    client.send(&Packet::Connect(Box::new(connect_packet(
        V5,
        "ticket-taker",
        true,
    ))));
    assert!(matches!(client.next(), Packet::ConnAck(_)));
    client.send(&Packet::PingReq(codec::PingReq));
    assert!(matches!(client.next(), Packet::PingResp(_)));
    client.quic.close();
}

fn counter(broker: &TestBroker, name: &'static str, at_least: f64) {
    scrape_until(broker, name, |s| {
        s.value(name, &[]).is_some_and(|v| v >= at_least)
    });
}

/// A broker with a QUIC listener, a TCP client watching `{prefix}/#`, and a client config that
/// holds the broker's resumption tickets.
struct Resumed {
    broker: TestBroker,
    watcher: RawClient,
    config: ClientConfig,
    _pki: Pki,
}

impl Resumed {
    fn new(prefix: &str) -> Self {
        let pki = Pki::new();
        let broker = broker(&pki);
        let mut watcher = RawClient::connected_clean(broker.addr(), V5, "watcher");
        watcher.subscribe(&format!("{prefix}/#"), QoS::AtLeastOnce);
        let config = pki.resuming_config();
        take_tickets(&broker, &config);
        Self {
            broker,
            watcher,
            config,
            _pki: pki,
        }
    }

    /// A connection that resumes, with [`first_packets`] written in 0-RTT (not sent yet).
    fn early_client(&self, client_id: &str, prefix: &str) -> QuicClient {
        let quic = self.broker.addr_of("quic");
        let mut client = QuicClient::connect_with(quic, "localhost", self.config.clone());
        let early = first_packets(client_id, prefix);
        assert!(
            client.send_early(&early),
            "the first connection left a ticket"
        );
        client
    }

    /// Sends `flight` to the broker from a socket of its own.
    fn send_as_attacker(&self, flight: &[Vec<u8>]) {
        let attacker = UdpSocket::bind("127.0.0.1:0").unwrap();
        for datagram in flight {
            attacker
                .send_to(datagram, self.broker.addr_of("quic"))
                .unwrap();
        }
    }
}

#[test]
fn a_resumed_client_connects_and_publishes_in_0rtt_and_a_qos_0_publish_waits_for_the_handshake() {
    let mut rig = Resumed::new("early");
    let mut client = MqttOverQuic::over(rig.early_client("early", "early"));
    let Packet::ConnAck(ack) = client.next() else {
        panic!("CONNACK expected")
    };
    assert_eq!(ack.reason_code, ReasonCode::Success);
    let Packet::PubAck(ack) = client.next() else {
        panic!("PUBACK expected")
    };
    assert_eq!(ack.packet_id.get(), 1);
    assert!(
        client.quic.accepted_0rtt(),
        "the broker took the 0-RTT data"
    );

    let first = rig.watcher.expect_publish_acked();
    assert_eq!(first.topic(), "early/one");
    let second = rig.watcher.expect_publish_acked();
    assert_eq!(
        second.topic(),
        "early/zero",
        "delivered once the handshake completed"
    );
    counter(&rig.broker, "ringmq_quic_zero_rtt_accepted_total", 1.0);
    counter(&rig.broker, "ringmq_quic_early_data_waited_total", 1.0);
}

#[test]
fn a_first_flight_replayed_after_the_clients_use_is_not_handled_again() {
    let mut rig = Resumed::new("replayed");
    let mut quic = rig.early_client("replayed", "replayed");
    let flight = quic.first_flight(true);
    let mut client = MqttOverQuic::over(quic);
    assert!(matches!(client.next(), Packet::ConnAck(_)));
    assert!(matches!(client.next(), Packet::PubAck(_)));
    assert!(client.quic.accepted_0rtt());
    assert_eq!(rig.watcher.expect_publish_acked().topic(), "replayed/one");
    assert_eq!(rig.watcher.expect_publish_acked().topic(), "replayed/zero");
    client.quic.close();
    // Once the client's connection is gone (the replay is not taken for its late packets).
    scrape_until(&rig.broker, "the QUIC connections gone", |s| {
        s.value("ringmq_quic_connections", &[]) == Some(0.0)
    });

    // An attacker who copied the first flight sends it again: the ticket in it was used.
    rig.send_as_attacker(&flight);
    rig.watcher.expect_silence(SILENCE);
    let scraped = crate::ops::scrape(&rig.broker);
    let accepted = scraped.value("ringmq_quic_zero_rtt_accepted_total", &[]);
    assert_eq!(accepted, Some(1.0), "the replay got no 0-RTT");
}

#[test]
fn a_copy_sent_ahead_of_the_client_gets_only_its_replay_safe_packets_handled() {
    let mut rig = Resumed::new("copied");
    // The client's first flight never reaches the broker; an attacker's copy does, and the
    // attacker cannot complete the handshake.
    let flight = rig.early_client("victim", "copied").first_flight(false);
    rig.send_as_attacker(&flight);
    let publish = rig.watcher.expect_publish_acked();
    assert_eq!(publish.topic(), "copied/one", "QoS 1 is handled early");
    rig.watcher.expect_silence(SILENCE);
    counter(&rig.broker, "ringmq_quic_zero_rtt_accepted_total", 1.0);
}
