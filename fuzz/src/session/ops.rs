//! The operations a fuzz input is made of, each read from the input and applied to the broker.

use std::num::NonZeroU16;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use codec::{
    Connect, ConnectProperties, Disconnect, MqttStr, Packet, PacketId, PingReq, ProtocolVersion,
    PubAck, PubComp, PubRec, PubRel, Publish, PublishProperties, QoS, ReasonCode, Subscribe,
    SubscriptionOptions, Unsubscribe, Will,
};

use super::input::Input;
use super::model::{AckKind, FILTERS, Link, TOPICS};
use super::World;

const CLIENT_IDS: [&str; 3] = ["c0", "c1", "c2"];

fn text(value: &str) -> MqttStr {
    MqttStr::from_bytes(Bytes::copy_from_slice(value.as_bytes())).expect("valid UTF-8")
}

fn qos(input: &mut Input) -> QoS {
    QoS::from_u8(input.below(3)).expect("0..3 is a QoS")
}

/// A small packet id, so ids collide with the broker's own and with each other.
fn small_id(input: &mut Input) -> PacketId {
    PacketId::new(u16::from(input.below(6)) + 1).expect("non-zero")
}

impl World {
    pub(super) fn step(&mut self, input: &mut Input) {
        let slot = usize::from(input.below(super::CLIENTS as u8));
        let op = input.below(15);
        let usable = self.clients[slot].link.as_ref().is_some_and(|l| !l.done);
        if super::tracing() {
            eprintln!("client {slot} op {op} (usable: {usable})");
        }
        if op == 0 || !usable {
            return self.connect(slot, input);
        }
        match op {
            1 => self.subscribe(slot, input),
            2 => self.unsubscribe(slot, input),
            3 => self.publish(slot, input),
            4 => self.acknowledge(slot, input, AckKind::PubAck),
            5 => self.acknowledge(slot, input, AckKind::PubRec),
            6 => self.acknowledge(slot, input, AckKind::PubComp),
            7 => {
                let release = PubRel::new(small_id(input));
                self.send(slot, &Packet::PubRel(release));
            }
            8 => self.send(slot, &Packet::PingReq(PingReq)),
            9 => self.disconnect(slot, input),
            10 => {
                let garbage = Bytes::copy_from_slice(input.bytes(64));
                let link = self.clients[slot].link.as_mut().expect("checked usable");
                link.garbled |= !link.connacked;
                self.send_bytes(slot, garbage);
            }
            11 => self.broker.peer_closed(self.conn(slot)),
            12 => self.broker.reset(self.conn(slot)),
            13 => {
                let by = Duration::from_millis(250 * u64::from(input.byte()));
                self.broker.advance(by);
            }
            _ => {
                let link = self.clients[slot].link.as_mut().expect("checked usable");
                link.split = !link.split;
            }
        }
    }

    fn conn(&self, slot: usize) -> ring_runtime::ConnId {
        self.clients[slot].link.as_ref().expect("checked usable").conn
    }

    fn protocol(&self, slot: usize) -> ProtocolVersion {
        let link = self.clients[slot].link.as_ref();
        link.and_then(|l| l.protocol).unwrap_or(ProtocolVersion::V5)
    }

    fn send(&mut self, slot: usize, packet: &Packet) {
        if super::tracing() {
            eprintln!("  client {slot} -> {packet:?}");
        }
        let mut buf = BytesMut::new();
        if codec::encode(packet, self.protocol(slot), &mut buf).is_ok() {
            self.send_bytes(slot, buf.freeze());
        }
    }

    /// Sends `bytes` on the client's connection, in two reads when it splits.
    fn send_bytes(&mut self, slot: usize, mut bytes: Bytes) {
        let link = self.clients[slot].link.as_ref().expect("checked usable");
        let conn = link.conn;
        if link.split && bytes.len() > 1 {
            let head = bytes.split_to(bytes.len() / 2);
            self.broker.send(conn, head);
        }
        self.broker.send(conn, bytes);
    }

    /// A new connection for the client (the old one, if open, stays to see its goodbye) with a
    /// CONNECT, or garbage instead.
    fn connect(&mut self, slot: usize, input: &mut Input) {
        let protocol = if input.flag() {
            ProtocolVersion::V5
        } else {
            ProtocolVersion::V3_1_1
        };
        let receive_maximum = NonZeroU16::new(u16::from(input.below(5)));
        let alias_max = u16::from(input.below(3));
        let conn = self.broker.connect();
        self.next_link += 1;
        let bound = self.inflight_bound;
        let window = match (protocol, receive_maximum) {
            (ProtocolVersion::V5, Some(max)) => usize::from(max.get()).min(bound),
            _ => bound,
        };
        let link = Link {
            conn,
            no: self.next_link,
            protocol: Some(protocol),
            window,
            alias_max: if protocol == ProtocolVersion::V5 { alias_max } else { 0 },
            aliases: Default::default(),
            connacked: false,
            done: false,
            subscribed: 0,
            split: false,
            garbled: false,
        };
        let client = &mut self.clients[slot];
        if let Some(old) = client.link.replace(link) {
            client.old.push(old);
        }
        let connect = Connect {
            protocol,
            clean_start: input.flag(),
            keep_alive: [0, 1, 5, 60][usize::from(input.below(4))],
            client_id: text(CLIENT_IDS[slot]),
            will: input.flag().then(|| will(input)),
            username: None,
            password: None,
            properties: ConnectProperties {
                session_expiry_interval: [None, Some(0), Some(30)][usize::from(input.below(3))],
                receive_maximum,
                topic_alias_maximum: Some(alias_max),
                ..ConnectProperties::default()
            },
        };
        if input.below(8) == 0 {
            let garbage = Bytes::copy_from_slice(input.bytes(32));
            self.clients[slot].link.as_mut().expect("just set").garbled = !garbage.is_empty();
            self.send_bytes(slot, garbage);
        }
        self.send(slot, &Packet::Connect(Box::new(connect)));
    }

    fn subscribe(&mut self, slot: usize, input: &mut Input) {
        let id = small_id(input);
        let filter = usize::from(input.below(FILTERS.len() as u8));
        let options = SubscriptionOptions {
            qos: qos(input),
            no_local: input.flag(),
            ..SubscriptionOptions::default()
        };
        self.clients[slot].subscribing(id.get(), filter);
        let subscribe = Subscribe {
            packet_id: id,
            filters: vec![(text(FILTERS[filter]), options)],
            properties: Default::default(),
        };
        self.send(slot, &Packet::Subscribe(subscribe));
    }

    fn unsubscribe(&mut self, slot: usize, input: &mut Input) {
        let id = small_id(input);
        let filter = usize::from(input.below(FILTERS.len() as u8));
        self.clients[slot].unsubscribing(id.get(), filter);
        let unsubscribe = Unsubscribe {
            packet_id: id,
            filters: vec![text(FILTERS[filter])],
            properties: Default::default(),
        };
        self.send(slot, &Packet::Unsubscribe(unsubscribe));
    }

    fn publish(&mut self, slot: usize, input: &mut Input) {
        self.seq += 1;
        let topic = TOPICS[usize::from(input.below(TOPICS.len() as u8))];
        let payload = Bytes::copy_from_slice(&self.seq.to_be_bytes());
        let mut publish = Publish::new(text(topic), payload);
        publish.qos = qos(input);
        publish.retain = input.below(4) == 0;
        if publish.qos != QoS::AtMostOnce {
            publish.packet_id = Some(small_id(input));
        }
        let alias = input.below(4);
        if alias > 0 && self.protocol(slot) == ProtocolVersion::V5 {
            let mut properties = PublishProperties::default();
            properties.topic_alias = NonZeroU16::new(u16::from(alias));
            if input.flag() {
                publish.content.set_topic(MqttStr::default());
            }
            publish.properties = properties.into();
        }
        if input.below(8) == 0 {
            let mut properties = publish.properties.clone().into_inner();
            properties.message_expiry_interval = Some(u32::from(input.below(3)));
            publish.properties = properties.into();
        }
        self.send(slot, &Packet::Publish(publish));
    }

    /// An acknowledgement for an outstanding PUBLISH (or, sometimes, any id).
    fn acknowledge(&mut self, slot: usize, input: &mut Input, kind: AckKind) {
        let client = &mut self.clients[slot];
        let pick = usize::from(input.byte());
        let known = client.outstanding.keys().nth(pick % client.outstanding.len().max(1));
        let id = match known.copied().and_then(PacketId::new) {
            Some(id) if pick < 200 => id,
            _ => small_id(input),
        };
        client.acknowledged(id.get(), kind);
        let packet = match kind {
            AckKind::PubAck => Packet::PubAck(PubAck::new(id)),
            AckKind::PubRec => Packet::PubRec(PubRec::new(id)),
            AckKind::PubComp => Packet::PubComp(PubComp::new(id)),
        };
        self.send(slot, &packet);
    }

    fn disconnect(&mut self, slot: usize, input: &mut Input) {
        let reason_code = if input.flag() {
            ReasonCode::DisconnectWithWillMessage
        } else {
            ReasonCode::Success
        };
        let disconnect = Disconnect {
            reason_code,
            properties: Default::default(),
        };
        self.send(slot, &Packet::Disconnect(disconnect));
    }
}

/// A will on a topic the others subscribe to; its payload is no message number.
fn will(input: &mut Input) -> Will {
    let mut will = Will {
        topic: text(TOPICS[usize::from(input.below(TOPICS.len() as u8))]),
        payload: Bytes::from_static(b"will"),
        qos: qos(input),
        retain: input.flag(),
        properties: Default::default(),
    };
    will.properties.will_delay_interval = [None, Some(1), Some(5)][usize::from(input.below(3))];
    will
}
