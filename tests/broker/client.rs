//! A raw MQTT test client over `std::net::TcpStream` and the `codec` crate: exact control over
//! every packet sent and every byte received. Every read has a deadline, so no test can hang.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use codec::{
    ConnAck, Connect, ConnectProperties, Disconnect, Limits, MqttStr, Packet, PacketId, PubAck,
    PubComp, PubRec, PubRel, Publish, PublishProperties, QoS, ReasonCode, SubAck, Subscribe,
    SubscribeProperties, SubscriptionOptions, UnsubAck, Unsubscribe, UnsubscribeProperties,
};

pub use codec::ProtocolVersion;
pub use codec::ProtocolVersion::{V3_1_1 as V311, V5};

/// Longest wait for an expected packet.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long "nothing arrives" is watched for, after a fence made the broker's work visible.
pub const QUIET: Duration = Duration::from_millis(300);

/// What the socket produced next.
#[derive(Debug)]
pub enum Event {
    /// A complete packet.
    Packet(Box<Packet>),
    /// The broker closed the connection (EOF or reset).
    Closed,
    /// Nothing within the timeout.
    Timeout,
}

/// An MQTT string from text.
pub fn s(text: &str) -> MqttStr {
    MqttStr::from_bytes(Bytes::copy_from_slice(text.as_bytes())).expect("valid MQTT string")
}

/// A packet id from a number.
pub fn pid(id: u16) -> PacketId {
    PacketId::new(id).expect("non-zero packet id")
}

/// A CONNECT with no will, no credentials and no properties.
pub fn connect_packet(protocol: ProtocolVersion, client_id: &str, clean_start: bool) -> Connect {
    Connect {
        protocol,
        clean_start,
        keep_alive: 0,
        client_id: s(client_id),
        will: None,
        username: None,
        password: None,
        properties: ConnectProperties::default(),
    }
}

/// A CONNECT that keeps the session after the connection ends: Clean Start 0, and in 5.0 a
/// Session Expiry Interval of `expiry` seconds.
pub fn persistent_connect(protocol: ProtocolVersion, client_id: &str, expiry: u32) -> Connect {
    let mut connect = connect_packet(protocol, client_id, false);
    if protocol.is_v5() {
        connect.properties.session_expiry_interval = Some(expiry);
    }
    connect
}

/// A CONNECT frame: protocol `level`, connect `flags`, keep-alive 0, `rest` after the flags
/// (keep-alive, properties and payload as given).
pub fn connect_frame(level: u8, flags: u8, rest: &[u8]) -> Vec<u8> {
    let mut body = vec![0x00, 0x04, b'M', b'Q', b'T', b'T', level, flags];
    body.extend_from_slice(rest);
    let mut frame = vec![0x10, body.len() as u8];
    frame.extend_from_slice(&body);
    frame
}

/// A PUBLISH without properties.
pub fn publish_packet(topic: &str, payload: &[u8], qos: QoS, id: Option<u16>) -> Publish {
    Publish {
        dup: false,
        qos,
        retain: false,
        content: codec::TopicPayload::new(s(topic), Bytes::copy_from_slice(payload)),
        packet_id: id.map(pid),
        properties: PublishProperties::default().into(),
    }
}

/// A SUBSCRIBE of one filter with `options`.
pub fn subscribe_packet(id: u16, filter: &str, options: SubscriptionOptions) -> Subscribe {
    Subscribe {
        packet_id: pid(id),
        filters: vec![(s(filter), options)],
        properties: SubscribeProperties::default(),
    }
}

/// Subscription options with only a QoS.
pub fn qos_options(qos: QoS) -> SubscriptionOptions {
    SubscriptionOptions {
        qos,
        ..SubscriptionOptions::default()
    }
}

/// One raw client connection.
pub struct RawClient {
    stream: TcpStream,
    buf: BytesMut,
    /// Packets read while looking for another one, returned first by later reads.
    stash: VecDeque<Packet>,
    /// The protocol used to encode and decode.
    pub protocol: ProtocolVersion,
    next_id: u16,
}

impl RawClient {
    /// Opens a TCP connection; nothing is sent yet.
    pub fn open(addr: SocketAddr, protocol: ProtocolVersion) -> Self {
        let stream = TcpStream::connect(addr).expect("TCP connect to the broker");
        Self::over(stream, protocol)
    }

    /// A client over a stream already connected to the broker (a socket with options set
    /// before its connect).
    pub fn over(stream: TcpStream, protocol: ProtocolVersion) -> Self {
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Self {
            stream,
            buf: BytesMut::new(),
            stash: VecDeque::new(),
            protocol,
            next_id: 0,
        }
    }

    /// Sends `connect` and returns the CONNACK, whatever its reason code.
    pub fn connect(addr: SocketAddr, connect: Connect) -> (Self, ConnAck) {
        let mut client = Self::open(addr, connect.protocol);
        client.send(&Packet::from(connect));
        let connack = client.expect_connack();
        (client, connack)
    }

    /// A connected client; the CONNACK must be Success.
    pub fn connected(addr: SocketAddr, connect: Connect) -> Self {
        let id = connect.client_id.clone();
        let (client, connack) = Self::connect(addr, connect);
        assert_eq!(
            connack.reason_code,
            ReasonCode::Success,
            "CONNACK for {id:?}: {connack:?}"
        );
        client
    }

    /// A connected client with a clean session and no keep-alive.
    pub fn connected_clean(addr: SocketAddr, protocol: ProtocolVersion, client_id: &str) -> Self {
        Self::connected(addr, connect_packet(protocol, client_id, true))
    }

    /// A connected client with a clean session, no keep-alive and `username` (no password).
    pub fn connected_as(
        addr: SocketAddr,
        protocol: ProtocolVersion,
        client_id: &str,
        username: &str,
    ) -> Self {
        let mut connect = connect_packet(protocol, client_id, true);
        connect.username = Some(codec::MqttStr::try_from(username).expect("a valid username"));
        Self::connected(addr, connect)
    }

    /// A fresh packet id for this client (1, 2, 3...).
    pub fn next_packet_id(&mut self) -> u16 {
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.next_id
    }

    /// Encodes and sends a packet.
    pub fn send(&mut self, packet: &Packet) {
        let mut out = BytesMut::new();
        codec::encode(packet, self.protocol, &mut out).expect("test packet encodes");
        self.send_raw(&out);
    }

    /// Sends bytes as they are; a broker that already closed the socket is not an error.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        if let Err(e) = self.stream.write_all(bytes) {
            assert!(
                matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset),
                "send failed: {e}"
            );
        }
    }

    /// The next packet, a close, or a timeout after `timeout`.
    pub fn next_event(&mut self, timeout: Duration) -> Event {
        if let Some(packet) = self.stash.pop_front() {
            return Event::Packet(Box::new(packet));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let limits = Limits::new(self.protocol);
            match codec::decode(&mut self.buf, &limits) {
                Ok(Some(packet)) => return Event::Packet(Box::new(packet)),
                Ok(None) => {}
                Err(e) => panic!("broker sent a malformed packet: {e}"),
            }
            let now = Instant::now();
            if now >= deadline {
                return Event::Timeout;
            }
            let wait = (deadline - now).max(Duration::from_millis(1));
            self.stream.set_read_timeout(Some(wait)).expect("timeout");
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Event::Closed,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Event::Closed,
            }
        }
    }

    /// Puts packets already read back in front of what arrives next.
    pub fn unread(&mut self, packets: Vec<Packet>) {
        for packet in packets.into_iter().rev() {
            self.stash.push_front(packet);
        }
    }

    /// The next packet; fails the test on close or timeout.
    pub fn recv(&mut self) -> Packet {
        match self.next_event(READ_TIMEOUT) {
            Event::Packet(packet) => *packet,
            other => panic!("expected a packet, got {other:?}"),
        }
    }

    /// The first packet `pick` accepts; others read meanwhile are kept for later reads.
    pub fn recv_where<T>(&mut self, what: &str, mut pick: impl FnMut(&Packet) -> Option<T>) -> T {
        if let Some(index) = self.stash.iter().position(|p| pick(p).is_some()) {
            let packet = self.stash.remove(index).expect("index is in range");
            return pick(&packet).expect("picked before");
        }
        let mut skipped = Vec::new();
        let deadline = Instant::now() + READ_TIMEOUT;
        let found = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event_unstashed(left) {
                Event::Packet(packet) => match pick(&packet) {
                    Some(found) => break found,
                    None => skipped.push(*packet),
                },
                other => panic!("waiting for {what}: got {other:?} after {skipped:?}"),
            }
        };
        self.stash.extend(skipped);
        found
    }

    fn next_event_unstashed(&mut self, timeout: Duration) -> Event {
        let stash = std::mem::take(&mut self.stash);
        let event = self.next_event(timeout);
        self.stash = stash;
        event
    }

    /// The CONNACK (the first packet).
    pub fn expect_connack(&mut self) -> ConnAck {
        match self.recv() {
            Packet::ConnAck(connack) => *connack,
            other => panic!("expected CONNACK, got {other:?}"),
        }
    }

    /// The next PUBLISH; any other packet fails the test.
    pub fn expect_publish(&mut self) -> Publish {
        match self.recv() {
            Packet::Publish(publish) => publish,
            other => panic!("expected PUBLISH, got {other:?}"),
        }
    }

    /// The next PUBLISH on `topic`, keeping other packets for later.
    pub fn expect_publish_on(&mut self, topic: &str) -> Publish {
        self.recv_where(&format!("PUBLISH on {topic}"), |p| match p {
            Packet::Publish(publish) if publish.topic() == topic => Some(publish.clone()),
            _ => None,
        })
    }

    /// The next PUBLISH, acknowledged as its QoS requires (QoS 2: PUBREC, PUBREL, PUBCOMP).
    pub fn expect_publish_acked(&mut self) -> Publish {
        let publish = self.expect_publish();
        self.acknowledge(&publish);
        publish
    }

    /// Acknowledges a received PUBLISH (QoS 2 runs the whole PUBREC/PUBREL/PUBCOMP exchange).
    pub fn acknowledge(&mut self, publish: &Publish) {
        let Some(id) = publish.packet_id else {
            return;
        };
        match publish.qos {
            QoS::AtMostOnce => {}
            QoS::AtLeastOnce => self.send(&Packet::PubAck(PubAck::new(id))),
            QoS::ExactlyOnce => {
                self.send(&Packet::PubRec(PubRec::new(id)));
                let rel = self.recv_where("PUBREL", |p| match p {
                    Packet::PubRel(rel) if rel.packet_id == id => Some(rel.clone()),
                    _ => None,
                });
                assert_eq!(rel.reason_code, ReasonCode::Success);
                self.send(&Packet::PubComp(PubComp::new(id)));
            }
        }
    }

    /// Fails the test if anything (a packet or a close) arrives within `window`.
    pub fn expect_silence(&mut self, window: Duration) {
        match self.next_event(window) {
            Event::Timeout => {}
            other => panic!("expected silence, got {other:?}"),
        }
    }

    /// Reads until the broker closes the connection; returns the packets that came first.
    pub fn expect_closed(&mut self) -> Vec<Packet> {
        let mut before = Vec::new();
        loop {
            match self.next_event(READ_TIMEOUT) {
                Event::Packet(packet) => before.push(*packet),
                Event::Closed => return before,
                Event::Timeout => panic!("connection not closed; received {before:?}"),
            }
        }
    }

    /// Expects the broker to close the connection, after a 5.0 DISCONNECT with `reason` (3.1.1:
    /// after nothing at all).
    pub fn expect_disconnect(&mut self, reason: ReasonCode) {
        let before = self.expect_closed();
        if self.protocol.is_v5() {
            match before.last() {
                Some(Packet::Disconnect(d)) => assert_eq!(
                    d.reason_code,
                    reason,
                    "DISCONNECT reason (expected {}, got {})",
                    reason.name(),
                    d.reason_code.name()
                ),
                other => panic!("expected DISCONNECT {}, got {other:?}", reason.name()),
            }
        } else {
            assert!(
                before.is_empty(),
                "3.1.1 connection closed after {before:?}"
            );
        }
    }

    /// SUBSCRIBE and its SUBACK.
    pub fn subscribe_with(&mut self, subscribe: Subscribe) -> SubAck {
        let id = subscribe.packet_id;
        self.send(&Packet::Subscribe(subscribe));
        self.recv_where("SUBACK", |p| match p {
            Packet::SubAck(ack) if ack.packet_id == id => Some(ack.clone()),
            _ => None,
        })
    }

    /// Subscribes to one filter and checks that `qos` was granted.
    pub fn subscribe(&mut self, filter: &str, qos: QoS) {
        let id = self.next_packet_id();
        let ack = self.subscribe_with(subscribe_packet(id, filter, qos_options(qos)));
        assert_eq!(ack.reason_codes, vec![ReasonCode::granted(qos)], "{filter}");
    }

    /// UNSUBSCRIBE one filter and its UNSUBACK.
    pub fn unsubscribe(&mut self, filter: &str) -> UnsubAck {
        let id = pid(self.next_packet_id());
        self.send(&Packet::Unsubscribe(Unsubscribe {
            packet_id: id,
            filters: vec![s(filter)],
            properties: UnsubscribeProperties::default(),
        }));
        self.recv_where("UNSUBACK", |p| match p {
            Packet::UnsubAck(ack) if ack.packet_id == id => Some(ack.clone()),
            _ => None,
        })
    }

    /// Publishes and completes the QoS flow; returns the PUBACK/PUBREC reason code (Success for
    /// QoS 0).
    pub fn publish(&mut self, publish: Publish) -> ReasonCode {
        let qos = publish.qos;
        let id = publish.packet_id;
        self.send(&Packet::Publish(publish));
        let Some(id) = id else {
            return ReasonCode::Success;
        };
        match qos {
            QoS::AtMostOnce => ReasonCode::Success,
            QoS::AtLeastOnce => self.recv_where("PUBACK", |p| match p {
                Packet::PubAck(ack) if ack.packet_id == id => Some(ack.reason_code),
                _ => None,
            }),
            QoS::ExactlyOnce => {
                let reason = self.recv_where("PUBREC", |p| match p {
                    Packet::PubRec(rec) if rec.packet_id == id => Some(rec.reason_code),
                    _ => None,
                });
                if reason.is_error() {
                    return reason;
                }
                self.send(&Packet::PubRel(PubRel::new(id)));
                let comp = self.recv_where("PUBCOMP", |p| match p {
                    Packet::PubComp(comp) if comp.packet_id == id => Some(comp.reason_code),
                    _ => None,
                });
                assert_eq!(comp, ReasonCode::Success, "PUBCOMP reason");
                reason
            }
        }
    }

    /// Publishes `payload` on `topic` with `qos` (a fresh packet id for QoS 1/2).
    pub fn publish_simple(&mut self, topic: &str, payload: &[u8], qos: QoS) -> ReasonCode {
        let id = (qos != QoS::AtMostOnce).then(|| self.next_packet_id());
        self.publish(publish_packet(topic, payload, qos, id))
    }

    /// The PUBLISH packets the broker sent before answering a PINGREQ now (acknowledged when
    /// `ack`); any other packet fails the test.
    pub fn drain_publishes(&mut self, ack: bool) -> Vec<Publish> {
        self.ping();
        let mut got = Vec::new();
        while let Event::Packet(packet) = self.next_event(Duration::ZERO) {
            match *packet {
                Packet::Publish(publish) => {
                    if ack {
                        self.acknowledge(&publish);
                    }
                    got.push(publish);
                }
                other => panic!("expected only PUBLISH, got {other:?}"),
            }
        }
        got
    }

    /// A round trip (PINGREQ/PINGRESP): everything sent before it has been processed.
    pub fn ping(&mut self) {
        self.send(&Packet::PingReq(codec::PingReq));
        self.recv_where("PINGRESP", |p| {
            matches!(p, Packet::PingResp(_)).then_some(())
        });
    }

    /// A normal DISCONNECT (reason 0x00).
    pub fn disconnect(mut self) {
        self.send(&Packet::Disconnect(Disconnect::default()));
        self.expect_closed();
    }

    /// DISCONNECT with a reason code (5.0).
    pub fn disconnect_with(mut self, reason: ReasonCode) {
        self.send(&Packet::Disconnect(Disconnect {
            reason_code: reason,
            properties: Default::default(),
        }));
        self.expect_closed();
    }

    /// Drops the socket without DISCONNECT (an abnormal close for the broker).
    pub fn drop_abruptly(self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}
