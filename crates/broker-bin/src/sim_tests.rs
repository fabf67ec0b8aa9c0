//! The simulated broker keeps working: deterministic scenarios on both protocol versions.

use super::*;
use codec::{
    Connect, ConnectProperties, MqttStr, PacketId, PingReq, PubAck, Publish, QoS, ReasonCode,
    Subscribe, SubscriptionOptions,
};

fn config() -> Config {
    crate::config::default_raw()
        .expect("embedded defaults parse")
        .validate()
        .expect("embedded defaults are valid")
}

fn id(value: u16) -> PacketId {
    PacketId::new(value).expect("non-zero")
}

fn text(value: &'static str) -> MqttStr {
    MqttStr::from_static(value).expect("valid UTF-8")
}

/// Connects `client` and checks the CONNACK.
fn connect(
    broker: &mut SimBroker,
    client: &'static str,
    protocol: ProtocolVersion,
    keep_alive: u16,
) -> ConnId {
    let (conn, rest) = connect_with(broker, client, protocol, keep_alive, Default::default());
    assert!(rest.is_empty(), "only a CONNACK expected, then {rest:?}");
    conn
}

/// Like [`connect`], with `properties` and Clean Start only when they carry no receive maximum;
/// returns what followed the CONNACK.
fn connect_with(
    broker: &mut SimBroker,
    client: &'static str,
    protocol: ProtocolVersion,
    keep_alive: u16,
    properties: ConnectProperties,
) -> (ConnId, Vec<Packet>) {
    let conn = broker.connect();
    let connect = Packet::Connect(Box::new(Connect {
        protocol,
        clean_start: properties.receive_maximum.is_none(),
        keep_alive,
        client_id: text(client),
        will: None,
        username: None,
        password: None,
        properties,
    }));
    broker
        .send_packet(conn, &connect, protocol)
        .expect("encodes");
    let mut packets = broker.received(conn, protocol).expect("decodes");
    match packets.first() {
        Some(Packet::ConnAck(ack)) => assert_eq!(ack.reason_code, ReasonCode::Success),
        other => panic!("expected a CONNACK, got {other:?}"),
    }
    (conn, packets.split_off(1))
}

fn subscribe(
    broker: &mut SimBroker,
    conn: ConnId,
    protocol: ProtocolVersion,
    filter: &'static str,
) {
    let options = SubscriptionOptions {
        qos: QoS::AtLeastOnce,
        ..SubscriptionOptions::default()
    };
    let subscribe = Packet::Subscribe(Subscribe {
        packet_id: id(1),
        filters: vec![(text(filter), options)],
        properties: Default::default(),
    });
    broker
        .send_packet(conn, &subscribe, protocol)
        .expect("encodes");
    let packets = broker.received(conn, protocol).expect("decodes");
    assert!(
        matches!(packets.as_slice(), [Packet::SubAck(ack)] if ack.reason_codes == [ReasonCode::GrantedQoS1]),
        "expected SUBACK granting QoS 1, got {packets:?}"
    );
}

/// `publisher` sends a QoS 1 PUBLISH on `a/b` with packet id `n`.
fn publish_on_a_b(
    broker: &mut SimBroker,
    publisher: ConnId,
    protocol: ProtocolVersion,
    n: u16,
    payload: &'static [u8],
) {
    let mut publish = Publish::new(text("a/b"), Bytes::from_static(payload));
    publish.qos = QoS::AtLeastOnce;
    publish.packet_id = Some(id(n));
    broker
        .send_packet(publisher, &Packet::Publish(publish), protocol)
        .expect("encodes");
}

/// The PUBLISH packets among `packets`, in order.
fn publishes(packets: Vec<Packet>) -> Vec<Publish> {
    (packets.into_iter())
        .filter_map(|p| match p {
            Packet::Publish(publish) => Some(publish),
            _ => None,
        })
        .collect()
}

fn publish_qos1_and_receive(protocol: ProtocolVersion) {
    let mut broker = SimBroker::new(config());
    let subscriber = connect(&mut broker, "sub", protocol, 0);
    subscribe(&mut broker, subscriber, protocol, "sensors/+");
    let publisher = connect(&mut broker, "pub", protocol, 0);
    let mut publish = Publish::new(text("sensors/a"), Bytes::from_static(b"21.5"));
    publish.qos = QoS::AtLeastOnce;
    publish.packet_id = Some(id(9));
    let publish = Packet::Publish(publish);
    broker
        .send_packet(publisher, &publish, protocol)
        .expect("encodes");
    let acks = broker.received(publisher, protocol).expect("decodes");
    assert!(matches!(acks.as_slice(), [Packet::PubAck(ack)] if ack.packet_id == id(9)));
    let delivered = broker.received(subscriber, protocol).expect("decodes");
    let [Packet::Publish(message)] = delivered.as_slice() else {
        panic!("expected one PUBLISH, got {delivered:?}");
    };
    assert_eq!(message.topic(), "sensors/a");
    assert_eq!(message.content.payload(), b"21.5");
    assert_eq!(message.qos, QoS::AtLeastOnce);
    let packet_id = message.packet_id.expect("QoS 1 has a packet id");
    let puback = Packet::PubAck(PubAck::new(packet_id));
    broker
        .send_packet(subscriber, &puback, protocol)
        .expect("encodes");
    assert!(
        broker
            .received(subscriber, protocol)
            .expect("decodes")
            .is_empty()
    );
    assert!(broker.shard().settled());
}

#[test]
fn a_qos1_publish_reaches_a_subscriber_on_3_1_1() {
    publish_qos1_and_receive(ProtocolVersion::V3_1_1);
}

#[test]
fn a_qos1_publish_reaches_a_subscriber_on_5_0() {
    publish_qos1_and_receive(ProtocolVersion::V5);
}

#[test]
fn keep_alive_expiry_closes_a_silent_client_once_the_clock_moves() {
    let protocol = ProtocolVersion::V5;
    let mut broker = SimBroker::new(config());
    let conn = connect(&mut broker, "quiet", protocol, 10);
    // A PINGREQ within the keep-alive restarts it.
    broker.advance(Duration::from_secs(9));
    broker
        .send_packet(conn, &Packet::PingReq(PingReq), protocol)
        .expect("encodes");
    let pong = broker.received(conn, protocol).expect("decodes");
    assert!(matches!(pong.as_slice(), [Packet::PingResp(_)]));
    broker.advance(Duration::from_secs(14));
    assert_eq!(broker.closed(conn), None, "1.5 keep-alives have not passed");
    broker.advance(Duration::from_secs(2));
    let goodbye = broker.received(conn, protocol).expect("decodes");
    assert!(
        matches!(goodbye.as_slice(), [Packet::Disconnect(d)] if d.reason_code == ReasonCode::KeepAliveTimeout),
        "expected DISCONNECT 0x8D, got {goodbye:?}"
    );
    assert_eq!(broker.closed(conn), Some(CloseReason::Local));
}

/// Keep-alive deadlines are checked by one sweep per shard, not a timer per connection: each
/// connection still closes on its own deadline, never before it and at most a sweep (1 s) after.
#[test]
fn each_silent_client_is_closed_within_a_sweep_of_its_own_keep_alive() {
    let protocol = ProtocolVersion::V3_1_1;
    let mut broker = SimBroker::new(config());
    let clients = [("ka2", 2), ("ka4", 4), ("ka10", 10)];
    let conns: Vec<(ConnId, u64)> = clients
        .iter()
        .map(|(name, keep_alive)| {
            let conn = connect(&mut broker, name, protocol, *keep_alive);
            (conn, u64::from(*keep_alive) * 3 / 2)
        })
        .collect();
    let mut closed_at = vec![None; conns.len()];
    for second in 1..=20u64 {
        broker.advance(Duration::from_secs(1));
        for (index, (conn, _)) in conns.iter().enumerate() {
            if closed_at[index].is_none() && broker.closed(*conn).is_some() {
                closed_at[index] = Some(second);
            }
        }
    }
    for ((_, grace), closed) in conns.iter().zip(closed_at) {
        let closed = closed.expect("closed within 20 s");
        assert!(
            closed >= *grace && closed <= grace + 1,
            "a keep-alive grace of {grace} s closed the connection at {closed} s"
        );
    }
}

#[test]
fn a_connection_that_never_sends_connect_is_closed_at_the_connect_timeout() {
    let mut broker = SimBroker::new(config());
    let conn = broker.connect();
    broker.advance(Duration::from_secs(9));
    assert_eq!(broker.closed(conn), None);
    broker.advance(Duration::from_secs(2));
    assert_eq!(broker.closed(conn), Some(CloseReason::Local));
}

/// Found by the `broker_session` fuzz target: on resuming a session the broker re-sent every
/// unacknowledged PUBLISH at once, beyond the new connection's Receive Maximum (MQTT-3.3.4-9).
/// Now it re-sends what fits and the rest as acknowledgements make room, in the original order.
#[test]
fn a_resumed_session_resends_within_the_new_receive_maximum() {
    let protocol = ProtocolVersion::V5;
    let mut broker = SimBroker::new(config());
    let window = |max: u16| ConnectProperties {
        receive_maximum: std::num::NonZeroU16::new(max),
        session_expiry_interval: Some(60),
        ..ConnectProperties::default()
    };
    let (first, _) = connect_with(&mut broker, "sub", protocol, 0, window(2));
    subscribe(&mut broker, first, protocol, "a/+");
    let publisher = connect(&mut broker, "pub", protocol, 0);
    for n in 1..=2 {
        publish_on_a_b(&mut broker, publisher, protocol, n, b"m");
    }
    assert_eq!(broker.received(first, protocol).expect("decodes").len(), 2);
    broker.reset(first);
    let (second, resent) = connect_with(&mut broker, "sub", protocol, 0, window(1));
    let resent_publishes = publishes(resent.clone());
    assert_eq!(
        resent_publishes.len(),
        1,
        "one PUBLISH within Receive Maximum 1, got {resent:?}"
    );
    assert!(resent_publishes[0].dup, "a re-sent PUBLISH carries DUP");
    let first_id = resent_publishes[0].packet_id.expect("QoS 1 has an id");
    let ack = Packet::PubAck(codec::PubAck::new(first_id));
    broker.send_packet(second, &ack, protocol).expect("encodes");
    let next = publishes(broker.received(second, protocol).expect("decodes"));
    assert_eq!(next.len(), 1, "the held re-send once the window has room");
    assert!(next[0].dup);
    assert_ne!(next[0].packet_id, Some(first_id));
}

/// A 5.0 subscriber to `a/+` whose Receive Maximum is `window`, and a 5.0 publisher:
/// `(subscriber, publisher)`.
fn windowed_subscriber_and_publisher(broker: &mut SimBroker, window: u16) -> (ConnId, ConnId) {
    let protocol = ProtocolVersion::V5;
    let properties = ConnectProperties {
        receive_maximum: std::num::NonZeroU16::new(window),
        ..ConnectProperties::default()
    };
    let (subscriber, _) = connect_with(broker, "sub", protocol, 0, properties);
    subscribe(broker, subscriber, protocol, "a/+");
    (subscriber, connect(broker, "pub", protocol, 0))
}

/// QoS 1 copies within the subscriber's window go out at once; those beyond it queue (charged
/// against the queues' budget) and leave in order as acknowledgements make room.
#[test]
fn copies_beyond_the_window_queue_and_keep_their_order() {
    let protocol = ProtocolVersion::V5;
    let mut broker = SimBroker::new(config());
    let (subscriber, publisher) = windowed_subscriber_and_publisher(&mut broker, 2);
    let payloads = |packets: Vec<Packet>| -> Vec<(Vec<u8>, PacketId)> {
        (publishes(packets).into_iter())
            .map(|publish| {
                let id = publish.packet_id.expect("QoS 1 has an id");
                (publish.content.payload().to_vec(), id)
            })
            .collect()
    };
    for (n, payload) in [(1, b"1"), (2, b"2"), (3, b"3"), (4, b"4")] {
        publish_on_a_b(&mut broker, publisher, protocol, n, payload);
    }
    let first = payloads(broker.received(subscriber, protocol).expect("decodes"));
    let sent: Vec<&[u8]> = first.iter().map(|(p, _)| p.as_slice()).collect();
    assert_eq!(sent, [b"1", b"2"], "the window's two, at once");
    let one_queued = (text("a/b").len() + 1) as u64;
    assert_eq!(
        broker.shard().handler().queued_bytes_charged(),
        2 * one_queued
    );
    let mut next_payloads = Vec::new();
    for (_, packet_id) in first {
        let ack = Packet::PubAck(PubAck::new(packet_id));
        broker
            .send_packet(subscriber, &ack, protocol)
            .expect("encodes");
        next_payloads.extend(payloads(
            broker.received(subscriber, protocol).expect("decodes"),
        ));
    }
    let sent: Vec<&[u8]> = next_payloads.iter().map(|(p, _)| p.as_slice()).collect();
    assert_eq!(sent, [b"3", b"4"], "the queued ones, in order");
    assert_eq!(broker.shard().handler().queued_bytes_charged(), 0);
}

/// Acknowledgements for a whole window in one read (each read the short way) refill it once
/// the read is handled: the queued copies leave in order, under ids free again.
#[test]
fn acknowledgements_in_one_read_refill_the_window_in_order() {
    let protocol = ProtocolVersion::V5;
    let mut broker = SimBroker::new(config());
    let (subscriber, publisher) = windowed_subscriber_and_publisher(&mut broker, 3);
    let payloads: [&'static [u8]; 8] = [b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8"];
    for (n, payload) in (1..).zip(payloads) {
        publish_on_a_b(&mut broker, publisher, protocol, n, payload);
    }
    let mut delivered = Vec::new();
    let mut in_flight = publishes(broker.received(subscriber, protocol).expect("decodes"));
    while !in_flight.is_empty() {
        assert!(in_flight.len() <= 3, "never more than the window");
        let mut acks = bytes::BytesMut::new();
        for publish in &in_flight {
            delivered.push(publish.content.payload().to_vec());
            let ack = Packet::PubAck(PubAck::new(publish.packet_id.expect("QoS 1")));
            codec::encode(&ack, protocol, &mut acks).expect("encodes");
        }
        broker.send(subscriber, acks.freeze());
        in_flight = publishes(broker.received(subscriber, protocol).expect("decodes"));
    }
    let expected: Vec<Vec<u8>> = payloads.iter().map(|p| p.to_vec()).collect();
    assert_eq!(delivered, expected, "every copy once, in order");
    assert_eq!(broker.shard().handler().queued_bytes_charged(), 0);
}

/// Copies that go out at once are not queued, so they are not refused when offline sessions'
/// queues hold the whole `queues.max_total_queued_bytes`: a subscriber that keeps up gets every
/// message.
#[test]
fn a_subscriber_keeping_up_gets_every_copy_while_offline_queues_fill_the_budget() {
    let protocol = ProtocolVersion::V5;
    let mut config = config();
    let one_message = (text("a/b").len() + 1) as u64;
    config.queues.max_total_queued_bytes = one_message;
    let mut broker = SimBroker::new(config);
    let stored = ConnectProperties {
        receive_maximum: std::num::NonZeroU16::new(10),
        session_expiry_interval: Some(60),
        ..ConnectProperties::default()
    };
    let (idle, _) = connect_with(&mut broker, "idle", protocol, 0, stored);
    subscribe(&mut broker, idle, protocol, "a/+");
    broker.reset(idle);
    let online = connect(&mut broker, "online", protocol, 0);
    subscribe(&mut broker, online, protocol, "a/+");
    let publisher = connect(&mut broker, "pub", protocol, 0);
    for n in 1..=3 {
        publish_on_a_b(&mut broker, publisher, protocol, n, b"m");
    }
    assert_eq!(
        broker.shard().handler().queued_bytes_charged(),
        one_message,
        "the offline session's queue holds the whole budget"
    );
    let delivered = broker.received(online, protocol).expect("decodes");
    assert_eq!(publishes(delivered.clone()).len(), 3, "got {delivered:?}");
}

/// B's SUBSCRIBE and then A's PUBLISH arrive in one turn: the subscription change is stamped
/// first but reaches the shard's replica only with the turn's posts, so the PUBLISH waits for
/// it (`publish_order.rs`) and B gets the message; the publisher's later packets wait behind.
fn a_subscribe_read_just_before_a_publish_takes_effect_for_it(protocol: ProtocolVersion) {
    let mut broker = SimBroker::new(config());
    let subscriber = connect(&mut broker, "b", protocol, 0);
    let publisher = connect(&mut broker, "a", protocol, 0);
    let options = SubscriptionOptions {
        qos: QoS::AtLeastOnce,
        ..SubscriptionOptions::default()
    };
    let subscribe = Packet::Subscribe(Subscribe {
        packet_id: id(1),
        filters: vec![(text("a/#"), options)],
        properties: Default::default(),
    });
    let mut publish = Publish::new(text("a/b"), Bytes::from_static(b"first"));
    publish.qos = QoS::AtLeastOnce;
    publish.packet_id = Some(id(7));
    let ping = Packet::PingReq(PingReq);
    broker
        .send_together(
            &[
                (subscriber, &subscribe),
                (publisher, &Packet::Publish(publish)),
                (publisher, &ping),
            ],
            protocol,
        )
        .expect("encodes");
    let acks = broker.received(publisher, protocol).expect("decodes");
    assert!(
        matches!(acks.as_slice(), [Packet::PubAck(ack), Packet::PingResp(_)] if ack.packet_id == id(7)),
        "the PUBACK, then the PINGRESP sent behind the PUBLISH: {acks:?}"
    );
    let got = broker.received(subscriber, protocol).expect("decodes");
    assert!(
        matches!(got.first(), Some(Packet::SubAck(_))),
        "SUBACK first: {got:?}"
    );
    let delivered = publishes(got);
    assert_eq!(delivered.len(), 1, "the PUBLISH read after the SUBSCRIBE");
    assert_eq!(delivered[0].content.payload(), b"first");
    assert!(broker.shard().settled());
}

#[test]
fn a_subscribe_read_just_before_a_publish_takes_effect_for_it_v5() {
    a_subscribe_read_just_before_a_publish_takes_effect_for_it(ProtocolVersion::V5);
}

#[test]
fn a_subscribe_read_just_before_a_publish_takes_effect_for_it_v311() {
    a_subscribe_read_just_before_a_publish_takes_effect_for_it(ProtocolVersion::V3_1_1);
}
