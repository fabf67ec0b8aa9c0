//! MQTT over QUIC (`[[listeners.quic]]`, issue 51): a QUIC client (quinn-proto over a real UDP
//! socket, `crates/transport/tests/support/quic_client.rs`) speaks MQTT 5.0 on its first
//! bidirectional stream with TCP clients of the same broker, and keeps its session, with no
//! reconnect and no acknowledged message lost, while its address changes.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use bytes::BytesMut;
use codec::{Connect, Limits, Packet, QoS, ReasonCode};

use crate::client::{RawClient, V5, connect_packet, publish_packet, qos_options, subscribe_packet};
use crate::harness::TestBroker;
use crate::ops::{scrape, scrape_until};
use ringmq::ops::Scrape;

#[path = "../../crates/transport/tests/support/quic_client.rs"]
mod quic_client;

use quic_client::{Pki, QuicClient};

/// A broker with a QUIC listener (two shards) beside its TCP one.
fn broker(pki: &Pki) -> TestBroker {
    TestBroker::with_config(&format!(
        "[runtime]\nshards = 2\n[http]\nbind = \"127.0.0.1:0\"\n\
         [[listeners.quic]]\nbind = \"127.0.0.1:0\"\ncert = \"{}\"\nkey = \"{}\"\n",
        pki.cert.display(),
        pki.key.display()
    ))
}

/// An MQTT 5.0 client over QUIC: packets encoded onto the stream, decoded off it.
struct MqttOverQuic {
    quic: QuicClient,
    buf: Vec<u8>,
}

impl MqttOverQuic {
    fn connect(broker: &TestBroker, pki: &Pki, connect: Connect) -> (Self, codec::ConnAck) {
        let mut quic = QuicClient::connect(broker.addr_of("quic"), pki);
        quic.open_stream();
        let mut client = Self {
            quic,
            buf: Vec::new(),
        };
        client.send(&Packet::Connect(Box::new(connect)));
        let Packet::ConnAck(ack) = client.next() else {
            panic!("CONNACK expected")
        };
        (client, *ack)
    }

    fn send(&mut self, packet: &Packet) {
        let mut out = BytesMut::new();
        codec::encode(packet, V5, &mut out).expect("test packet encodes");
        self.quic.write_all(&out);
    }

    fn next(&mut self) -> Packet {
        let limits = Limits::new(V5);
        let decodes = |buf: &[u8]| {
            let mut bytes = BytesMut::from(buf);
            matches!(codec::decode(&mut bytes, &limits), Ok(Some(_)))
        };
        self.quic
            .read_until("an MQTT packet", &mut self.buf, decodes);
        let mut bytes = BytesMut::from(&self.buf[..]);
        let packet = codec::decode(&mut bytes, &limits).unwrap().unwrap();
        self.buf.drain(..self.buf.len() - bytes.len());
        packet
    }

    /// Publishes at QoS 1 and waits for the PUBACK.
    fn publish_acked(&mut self, topic: &str, payload: &[u8], id: u16) {
        self.send(&Packet::Publish(publish_packet(
            topic,
            payload,
            QoS::AtLeastOnce,
            Some(id),
        )));
        match self.next() {
            Packet::PubAck(ack) => {
                assert_eq!(ack.packet_id.get(), id);
                assert_eq!(ack.reason_code, ReasonCode::Success);
            }
            other => panic!("PUBACK expected, got {other:?}"),
        }
    }
}

#[test]
fn mqtt_over_quic_talks_with_tcp_clients() {
    let pki = Pki::new();
    let broker = broker(&pki);
    let (mut quic, ack) =
        MqttOverQuic::connect(&broker, &pki, connect_packet(V5, "over-quic", true));
    assert_eq!(ack.reason_code, ReasonCode::Success);
    quic.send(&Packet::Subscribe(subscribe_packet(
        1,
        "to/quic",
        qos_options(QoS::AtLeastOnce),
    )));
    assert!(matches!(quic.next(), Packet::SubAck(_)));
    let mut tcp = RawClient::connected_clean(broker.addr(), V5, "over-tcp");
    tcp.subscribe("from/quic", QoS::AtLeastOnce);

    tcp.publish_simple("to/quic", b"hello quic", QoS::AtLeastOnce);
    let Packet::Publish(publish) = quic.next() else {
        panic!("PUBLISH expected")
    };
    assert_eq!(
        (publish.topic(), publish.payload()),
        ("to/quic", &b"hello quic"[..])
    );
    quic.send(&Packet::PubAck(codec::PubAck::new(
        publish.packet_id.unwrap(),
    )));

    quic.publish_acked("from/quic", b"hello tcp", 7);
    let publish = tcp.expect_publish();
    assert_eq!(publish.payload(), b"hello tcp");
    let open = |s: &Scrape, listener| {
        s.value(
            "ringmq_listener_connections_open",
            &[("listener", listener)],
        )
    };
    let scraped = scrape_until(&broker, "one connection by listener", |s| {
        open(s, "quic") == Some(1.0) && open(s, "tcp") == Some(1.0)
    });
    assert_eq!(open(&scraped, "quic"), Some(1.0));
}

/// A device whose address changes (a NAT rebinding, a move between networks) keeps its QUIC
/// connection and its MQTT session: every QoS 1 message it published across twenty changes is
/// acknowledged and delivered, on one connection.
#[test]
fn a_client_that_changes_address_keeps_its_session_and_loses_nothing() {
    let pki = Pki::new();
    let broker = broker(&pki);
    let mut tcp = RawClient::connected_clean(broker.addr(), V5, "watcher");
    tcp.subscribe("moving/#", QoS::AtLeastOnce);
    let (mut quic, _) = MqttOverQuic::connect(&broker, &pki, connect_packet(V5, "mover", true));
    let mut sent = 0u16;
    for round in 0..20 {
        quic.quic.rebind();
        for _ in 0..5 {
            sent += 1;
            quic.publish_acked(&format!("moving/{round}"), &sent.to_be_bytes(), sent);
        }
    }
    for expected in 1..=sent {
        let publish = tcp.expect_publish();
        assert_eq!(publish.payload(), &expected.to_be_bytes());
        tcp.acknowledge(&publish);
    }
    let scraped = scrape(&broker);
    let open = scraped.value("ringmq_listener_connections_open", &[("listener", "quic")]);
    assert_eq!(open, Some(1.0), "one QUIC connection all along");
}
