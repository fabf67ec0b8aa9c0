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
pub(crate) mod quic_client;

use quic_client::{Pki, QuicClient};

/// A broker with a QUIC listener (two shards) beside its TCP one.
pub(crate) fn broker(pki: &Pki) -> TestBroker {
    TestBroker::with_config(&format!(
        "[runtime]\nshards = 2\n[http]\nbind = \"127.0.0.1:0\"\n\
         [[listeners.quic]]\nbind = \"127.0.0.1:0\"\ncert = \"{}\"\nkey = \"{}\"\n",
        pki.cert.display(),
        pki.key.display()
    ))
}

/// An MQTT 5.0 client over QUIC: packets encoded onto the stream, decoded off it.
pub(crate) struct MqttOverQuic {
    pub(crate) quic: QuicClient,
    buf: Vec<u8>,
}

impl MqttOverQuic {
    /// MQTT over `quic`, whose stream is open (or opens in 0-RTT).
    pub(crate) fn over(quic: QuicClient) -> Self {
        Self {
            quic,
            buf: Vec::new(),
        }
    }

    pub(crate) fn connect(
        broker: &TestBroker,
        pki: &Pki,
        connect: Connect,
    ) -> (Self, codec::ConnAck) {
        let mut quic = QuicClient::connect(broker.addr_of("quic"), pki);
        quic.open_stream();
        let mut client = Self::over(quic);
        client.send(&Packet::Connect(Box::new(connect)));
        let Packet::ConnAck(ack) = client.next() else {
            panic!("CONNACK expected")
        };
        (client, *ack)
    }

    pub(crate) fn send(&mut self, packet: &Packet) {
        let mut out = BytesMut::new();
        codec::encode(packet, V5, &mut out).expect("test packet encodes");
        self.quic.write_all(&out);
    }

    pub(crate) fn next(&mut self) -> Packet {
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
                let accepted = [ReasonCode::Success, ReasonCode::NoMatchingSubscribers];
                assert!(accepted.contains(&ack.reason_code), "{ack:?}");
            }
            other => panic!("PUBACK expected, got {other:?}"),
        }
    }

    /// Publishes at QoS 2 and completes the exchange (PUBREC, PUBREL, PUBCOMP).
    fn publish_exactly_once(&mut self, topic: &str, payload: &[u8], id: u16) {
        let qos = QoS::ExactlyOnce;
        self.send(&Packet::Publish(publish_packet(
            topic,
            payload,
            qos,
            Some(id),
        )));
        assert!(matches!(self.next(), Packet::PubRec(rec) if rec.packet_id.get() == id));
        self.send(&Packet::PubRel(codec::PubRel::new(
            codec::PacketId::new(id).unwrap(),
        )));
        assert!(matches!(self.next(), Packet::PubComp(comp) if comp.packet_id.get() == id));
    }

    /// The next PUBLISH, a QoS 2 one, received with the whole exchange.
    fn receive_exactly_once(&mut self) -> codec::Publish {
        let Packet::Publish(publish) = self.next() else {
            panic!("PUBLISH expected")
        };
        let id = publish.packet_id.unwrap();
        self.send(&Packet::PubRec(codec::PubRec::new(id)));
        assert!(matches!(self.next(), Packet::PubRel(rel) if rel.packet_id == id));
        self.send(&Packet::PubComp(codec::PubComp::new(id)));
        publish
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
    assert_eq!(scraped.value("ringmq_quic_connections", &[]), Some(1.0));
    assert_eq!(
        scraped.value("ringmq_quic_streams_opened_total", &[]),
        Some(1.0)
    );
    assert_eq!(scraped.value("ringmq_quic_refused_total", &[]), Some(0.0));
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
    let opened = scraped.value("ringmq_quic_streams_opened_total", &[]);
    assert_eq!(opened, Some(1.0), "never reconnected");
    let migrations = scraped.value("ringmq_quic_migrations_total", &[]);
    assert_eq!(migrations, Some(20.0), "one per address change");
    // The broker's view of the client's address followed it (the admin API's list).
    let listed = crate::ops::get(broker.http_addr(), "/api/v1/clients?search=mover", "");
    let address = quic.quic.local_addr().to_string();
    assert!(
        listed.body.contains(&address),
        "{address} in {}",
        listed.body
    );
}

/// A UDP relay on loopback between a QUIC client and the broker that drops and reorders
/// datagrams, both ways, from a seeded draw: the network QUIC is for.
struct LossyRelay {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl LossyRelay {
    /// Relays to `server`, dropping `loss_percent` of the datagrams and holding back
    /// `reorder_percent` of them until the next one has passed.
    fn start(server: std::net::SocketAddr, loss_percent: u64, reorder_percent: u64) -> Self {
        use std::net::UdpSocket;
        use std::sync::{Arc, Mutex};
        let front = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let back = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        back.connect(server).unwrap();
        for socket in [&front, &back] {
            socket
                .set_read_timeout(Some(std::time::Duration::from_millis(20)))
                .unwrap();
        }
        let addr = front.local_addr().unwrap();
        let client = Arc::new(Mutex::new(None));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let lossy = Lossy {
            loss_percent,
            reorder_percent,
        };
        let up = {
            let (front, back, client, stop) =
                (front.clone(), back.clone(), client.clone(), stop.clone());
            std::thread::spawn(move || {
                lossy.relay(
                    1,
                    &stop,
                    |buf| {
                        let (len, from) = front.recv_from(buf).ok()?;
                        *client.lock().unwrap() = Some(from);
                        Some(len)
                    },
                    |packet| {
                        let _ = back.send(packet);
                    },
                )
            })
        };
        let down = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                lossy.relay(
                    2,
                    &stop,
                    |buf| back.recv(buf).ok(),
                    |packet| {
                        if let Some(to) = *client.lock().unwrap() {
                            let _ = front.send_to(packet, to);
                        }
                    },
                )
            })
        };
        Self {
            addr,
            stop,
            threads: vec![up, down],
        }
    }

    /// Stops relaying; the datagrams dropped.
    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.threads.into_iter().map(|t| t.join().unwrap()).sum()
    }
}

/// One direction's faults.
#[derive(Clone, Copy)]
struct Lossy {
    loss_percent: u64,
    reorder_percent: u64,
}

impl Lossy {
    /// Receives with `receive`, passes on with `send` (or drops, or holds back one), until
    /// `stop`; the number dropped.
    fn relay(
        self,
        seed: u64,
        stop: &std::sync::atomic::AtomicBool,
        mut receive: impl FnMut(&mut [u8]) -> Option<usize>,
        mut send: impl FnMut(&[u8]),
    ) -> u64 {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut draw = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % 100
        };
        let (mut dropped, mut held): (u64, Option<Vec<u8>>) = (0, None);
        let mut buf = vec![0u8; 65_536];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let Some(len) = receive(&mut buf) else {
                if let Some(late) = held.take() {
                    send(&late);
                }
                continue;
            };
            if draw() < self.loss_percent {
                dropped += 1;
                continue;
            }
            if held.is_none() && draw() < self.reorder_percent {
                held = Some(buf[..len].to_vec());
                continue;
            }
            send(&buf[..len]);
            if let Some(late) = held.take() {
                send(&late);
            }
        }
        dropped
    }
}

/// Through 5 % loss and 5 % reordering both ways, every QoS 1 message in each direction is
/// acknowledged and delivered, in order, on one QUIC connection, and every QoS 2 message
/// exactly once.
#[test]
fn every_qos1_and_qos2_message_gets_through_loss_and_reordering() {
    let pki = Pki::new();
    let broker = broker(&pki);
    let relay = LossyRelay::start(broker.addr_of("quic"), 5, 5);
    let mut tcp = RawClient::connected_clean(broker.addr(), V5, "lossy-watcher");
    tcp.subscribe("lossy/up", QoS::AtLeastOnce);
    let mut quic = QuicClient::connect(relay.addr, &pki);
    quic.open_stream();
    let mut quic = MqttOverQuic {
        quic,
        buf: Vec::new(),
    };
    quic.send(&Packet::Connect(Box::new(connect_packet(
        V5, "lossy", true,
    ))));
    assert!(matches!(quic.next(), Packet::ConnAck(_)));
    quic.send(&Packet::Subscribe(subscribe_packet(
        1,
        "lossy/down",
        qos_options(QoS::AtLeastOnce),
    )));
    assert!(matches!(quic.next(), Packet::SubAck(_)));
    const MESSAGES: u16 = 200;
    for n in 1..=MESSAGES {
        quic.publish_acked("lossy/up", &n.to_be_bytes(), n);
    }
    for n in 1..=MESSAGES {
        let publish = tcp.expect_publish();
        assert_eq!(publish.payload(), &n.to_be_bytes());
        tcp.acknowledge(&publish);
        tcp.publish_simple("lossy/down", &n.to_be_bytes(), QoS::AtLeastOnce);
    }
    for n in 1..=MESSAGES {
        let Packet::Publish(publish) = quic.next() else {
            panic!("PUBLISH expected")
        };
        assert_eq!(publish.payload(), &n.to_be_bytes());
        quic.send(&Packet::PubAck(codec::PubAck::new(
            publish.packet_id.unwrap(),
        )));
    }
    exactly_once_both_ways(&mut quic, &mut tcp);
    // The broker ends the connection on the DISCONNECT (its close drains on its own timer,
    // whatever the relay drops), then counts its packets.
    quic.send(&Packet::Disconnect(codec::Disconnect {
        reason_code: ReasonCode::Success,
        properties: Default::default(),
    }));
    // The client goes on resending what was lost until the broker has closed and drained
    // the connection (its CONNECTION_CLOSE may be dropped on the way back: then only the
    // broker knows).
    let drained = |s: &Scrape| s.value("ringmq_quic_connections", &[]) == Some(0.0);
    quic.quic
        .drive_until("the broker's close", || drained(&scrape(&broker)));
    let scraped = scrape_until(&broker, "the connection's losses counted", drained);
    let lost = scraped
        .value("ringmq_quic_lost_packets_total", &[])
        .unwrap();
    let sent = scraped
        .value("ringmq_quic_sent_packets_total", &[])
        .unwrap();
    assert!(lost > 0.0 && sent > lost, "lost {lost} of {sent}");
    let dropped = relay.stop();
    assert!(dropped > 0, "the relay dropped datagrams");
}

/// QoS 2 over the lossy connection: 50 messages each way, each delivered once, in order.
fn exactly_once_both_ways(quic: &mut MqttOverQuic, tcp: &mut RawClient) {
    const MESSAGES: u16 = 50;
    tcp.subscribe("lossy/up2", QoS::ExactlyOnce);
    quic.send(&Packet::Subscribe(subscribe_packet(
        2,
        "lossy/down2",
        qos_options(QoS::ExactlyOnce),
    )));
    assert!(matches!(quic.next(), Packet::SubAck(_)));
    for n in 1..=MESSAGES {
        quic.publish_exactly_once("lossy/up2", &n.to_be_bytes(), 1000 + n);
        assert_eq!(tcp.expect_publish_acked().payload(), &n.to_be_bytes());
        tcp.publish_simple("lossy/down2", &n.to_be_bytes(), QoS::ExactlyOnce);
        assert_eq!(quic.receive_exactly_once().payload(), &n.to_be_bytes());
    }
}

/// Where aioquic is installed (scripts/test.d/00-tools.sh, `ensure_aioquic`).
fn aioquic_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("RINGMQ_AIOQUIC_DIR").map_or_else(
        || {
            let home = std::env::var_os("HOME").expect("HOME is set");
            std::path::PathBuf::from(home).join(".cache/ringmq-test/aioquic")
        },
        std::path::PathBuf::from,
    );
    assert!(
        dir.join("aioquic").is_dir(),
        "aioquic is not installed in {}: run scripts/test.d/00-tools.sh (ensure_aioquic)",
        dir.display()
    );
    dir
}

/// A third-party QUIC stack (Python's aioquic, another implementation than the broker's
/// quinn-proto) speaks MQTT 5.0 over QUIC with the broker: CONNACK, SUBACK, its QoS 1 message
/// acknowledged and delivered back to it; a TCP subscriber gets it too.
#[test]
fn aioquic_speaks_mqtt_over_quic_with_the_broker() {
    let pki = Pki::new();
    let broker = broker(&pki);
    let mut tcp = RawClient::connected_clean(broker.addr(), V5, "aioquic-watcher");
    tcp.subscribe("interop/#", QoS::AtLeastOnce);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/broker/quic_aioquic.py"
    );
    let quic = broker.addr_of("quic");
    let output = std::process::Command::new("timeout")
        .args([
            "40",
            "python3",
            script,
            "127.0.0.1",
            &quic.port().to_string(),
        ])
        .arg(&pki.cert)
        .arg("from-aioquic")
        .env("PYTHONPATH", aioquic_dir())
        .output()
        .expect("python3 runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        printed.trim(),
        "OK interop/aioquic hello from aioquic",
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let publish = tcp.expect_publish();
    assert_eq!(publish.payload(), b"hello from aioquic");
}

/// SIGHUP's certificate reload covers QUIC listeners: new handshakes get the new certificate,
/// the open connection keeps working, and a broken key file keeps the current one (named).
#[test]
fn a_reload_serves_new_quic_handshakes_with_the_new_certificate() {
    let old = Pki::new();
    let broker = broker(&old);
    let quic = broker.addr_of("quic");
    let (mut open, _) = MqttOverQuic::connect(&broker, &old, connect_packet(V5, "stays", true));
    let fresh = Pki::new();
    std::fs::copy(&fresh.cert, &old.cert).unwrap();
    std::fs::copy(&fresh.key, &old.key).unwrap();
    assert!(
        !QuicClient::connect(quic, &fresh).handshake_ok(),
        "the old certificate until the reload"
    );
    assert_eq!(broker.reload_certificates(), Vec::<String>::new());
    assert!(
        QuicClient::connect(quic, &fresh).handshake_ok(),
        "the new certificate after it"
    );
    assert!(
        !QuicClient::connect(quic, &old).handshake_ok(),
        "the old one is gone"
    );
    open.publish_acked("still/open", b"x", 1);
    std::fs::write(&old.key, "not a key").unwrap();
    let errors = broker.reload_certificates();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains(&old.key.display().to_string()),
        "{errors:?}"
    );
    assert!(
        QuicClient::connect(quic, &fresh).handshake_ok(),
        "the current one stays"
    );
}

/// `identity_as_username` on a QUIC listener: the verified client certificate's Common Name is
/// the session's username (the admin API shows it); a client without a certificate is refused
/// at the handshake (`require_client_cert`).
#[test]
fn a_client_certificate_names_the_user_over_quic() {
    let pki = crate::pki::TestPki::new();
    let dir = pki.dir.path();
    let device = pki.ca.client(dir, "device-7");
    let broker = TestBroker::with_config(&format!(
        "[http]\nbind = \"127.0.0.1:0\"\n[[listeners.quic]]\nbind = \"127.0.0.1:0\"\n\
         cert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\nrequire_client_cert = true\n\
         identity_as_username = true\n",
        pki.server.cert.display(),
        pki.server.key.display(),
        pki.ca.cert.display()
    ));
    let quic = broker.addr_of("quic");
    let with_cert = quic_client::client_config_from_files(
        &pki.ca.cert,
        Some((device.cert.as_path(), device.key.as_path())),
    );
    let mut client = QuicClient::connect_with(quic, "127.0.0.1", with_cert);
    client.open_stream();
    let mut mqtt = MqttOverQuic {
        quic: client,
        buf: Vec::new(),
    };
    mqtt.send(&Packet::Connect(Box::new(connect_packet(
        V5,
        "by-certificate",
        true,
    ))));
    let Packet::ConnAck(ack) = mqtt.next() else {
        panic!("CONNACK expected")
    };
    assert_eq!(ack.reason_code, ReasonCode::Success);
    let listed = crate::ops::get(broker.http_addr(), "/api/v1/clients?search=device-7", "");
    assert!(
        listed.body.contains("\"username\":\"device-7\""),
        "{}",
        listed.body
    );
    // Without a certificate: TLS 1.3 lets the client finish its side first, then the broker
    // refuses the handshake and closes the connection before any MQTT.
    let without = quic_client::client_config_from_files(&pki.ca.cert, None);
    let mut refused = QuicClient::connect_with(quic, "127.0.0.1", without);
    refused.drive_until("the broker's refusal", || false);
    assert!(refused.is_lost(), "no client certificate, no connection");
}
