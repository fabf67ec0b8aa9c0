//! Retained messages delivered as the connection drains (`shard/retained_delivery.rs`):
//! 20,000 retained messages reach a slow subscriber of `#` in full and once each, through a
//! small send-queue bound, while another client of the same shard keeps getting its messages;
//! UNSUBSCRIBE and a disconnect end a delivery midway; a message cleared or replaced after the
//! SUBSCRIBE is sent as it is when the delivery reaches it.

use std::collections::HashMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use codec::{Packet, ProtocolVersion, Publish, QoS};
use socket2::{Domain, Socket, Type};

use crate::client::{Event, RawClient, V5, V311, connect_packet, publish_packet};
use crate::harness::TestBroker;

/// Retained messages each test stores.
const RETAINED: usize = 20_000;
/// A small send-queue bound, a small per-turn share and room for the retained messages.
const CONFIG: &str = "[queues]\noutbound_bytes = 2048\n[retained]\ndelivery_per_turn = 32\n";
/// How long one full delivery may take (debug build, slow reader).
const DEADLINE: Duration = Duration::from_secs(60);

/// The retained topic of message `index`; odd ones are published at QoS 1, even ones at QoS 0.
fn topic_of(index: usize) -> String {
    format!("bulk/{index:05}")
}

fn qos_of(index: usize) -> QoS {
    if index % 2 == 1 {
        QoS::AtLeastOnce
    } else {
        QoS::AtMostOnce
    }
}

/// Stores `RETAINED` retained messages of 64 bytes, pipelined a thousand at a time.
fn store_retained(broker: &TestBroker) {
    let mut publisher = RawClient::connected_clean(broker.addr(), V311, "bulk-publisher");
    for chunk in (0..RETAINED).collect::<Vec<_>>().chunks(1000) {
        let mut frames = BytesMut::new();
        for &index in chunk {
            let id = (qos_of(index) != QoS::AtMostOnce).then_some((index % 1000) as u16 + 1);
            let publish = Publish {
                retain: true,
                ..publish_packet(&topic_of(index), &[b'r'; 64], qos_of(index), id)
            };
            codec::encode(&Packet::Publish(publish), V311, &mut frames).expect("encodes");
        }
        publisher.send_raw(&frames);
        let acks = chunk
            .iter()
            .filter(|&&i| qos_of(i) != QoS::AtMostOnce)
            .count();
        for _ in 0..acks {
            publisher.recv_where("PUBACK", |p| matches!(p, Packet::PubAck(_)).then_some(()));
        }
    }
    publisher.disconnect();
}

/// A connected client whose socket receives into a 4 KiB buffer (the broker's send queue
/// fills soon), and the shard it landed on.
fn slow_client(broker: &TestBroker, protocol: ProtocolVersion, id: &str) -> (RawClient, usize) {
    let before = broker.bytes_received_per_shard();
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    socket.connect(&broker.addr().into()).expect("connects");
    let mut client = RawClient::over(TcpStream::from(socket), protocol);
    client.send(&Packet::from(connect_packet(protocol, id, true)));
    client.expect_connack();
    let after = broker.bytes_received_per_shard();
    let shard = (0..after.len()).find(|&i| after[i] > before[i]);
    (client, shard.expect("one shard received the CONNECT"))
}

/// Reads retained copies slowly (a pause every 500) until `RETAINED` arrived, acknowledging
/// QoS 1 ones; returns how many times each topic came.
fn read_all_slowly(client: &mut RawClient) -> HashMap<String, u32> {
    let started = Instant::now();
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut copies = 0;
    while seen.len() < RETAINED {
        assert!(
            started.elapsed() < DEADLINE,
            "{} of {RETAINED} in time",
            seen.len()
        );
        match client.next_event(Duration::from_secs(5)) {
            Event::Packet(packet) => {
                let Packet::Publish(publish) = *packet else {
                    panic!("only retained PUBLISHes expected, got {packet:?}");
                };
                let topic = publish.topic().to_owned();
                client.acknowledge(&publish);
                if topic.starts_with("live/") {
                    continue; // the neighbour's messages: the reader's `#` matches them too
                }
                let index: usize = topic["bulk/".len()..].parse().expect("a bulk index");
                assert!(publish.retain, "{topic}: sent with RETAIN set");
                assert_eq!(publish.qos, qos_of(index), "{topic}: its own QoS");
                *seen.entry(topic).or_default() += 1;
                copies += 1;
                if copies % 500 == 0 {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            other => panic!("after {} retained copies: {other:?}", seen.len()),
        }
    }
    seen
}

#[test]
fn twenty_thousand_retained_reach_a_slow_subscriber_once_each_on_both_protocols() {
    let broker = TestBroker::with_config(CONFIG);
    store_retained(&broker);
    for protocol in [V311, V5] {
        let (mut reader, shard) = slow_client(&broker, protocol, "slow-reader");
        let mut neighbour = broker
            .connect_to_shard(shard, V5, "neighbour")
            .expect("a neighbour on the reader's shard");
        neighbour.subscribe("live/#", QoS::AtMostOnce);
        let mut talker = RawClient::connected_clean(broker.addr(), V5, "talker");
        reader.subscribe("#", QoS::AtLeastOnce);
        // The neighbour keeps getting its messages while the reader's delivery goes on.
        let neighbour_thread = std::thread::spawn(move || {
            for n in 0..50 {
                talker.publish_simple("live/x", format!("{n}").as_bytes(), QoS::AtLeastOnce);
                let got = neighbour.expect_publish_on("live/x");
                assert_eq!(got.payload(), format!("{n}").as_bytes());
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let seen = read_all_slowly(&mut reader);
        neighbour_thread
            .join()
            .expect("the neighbour got every message");
        assert!(seen.values().all(|&n| n == 1), "each retained message once");
        reader.ping();
        reader.disconnect();
    }
    assert_eq!(broker.metrics().messages_dropped, 0, "nothing dropped");
}

/// Reads packets in order, acknowledging PUBLISHes, until one that `is_end` accepts; returns
/// how many PUBLISHes came before it.
fn publishes_until(client: &mut RawClient, what: &str, is_end: fn(&Packet) -> bool) -> usize {
    let mut publishes = 0;
    loop {
        match client.next_event(Duration::from_secs(5)) {
            Event::Packet(packet) => match *packet {
                Packet::Publish(publish) => {
                    client.acknowledge(&publish);
                    publishes += 1;
                }
                ref end if is_end(end) => return publishes,
                other => panic!("waiting for {what}: unexpected {other:?}"),
            },
            other => panic!("waiting for {what}: {other:?}"),
        }
    }
}

#[test]
fn unsubscribe_and_disconnect_end_a_delivery_midway() {
    let broker = TestBroker::with_config(CONFIG);
    store_retained(&broker);
    for protocol in [V311, V5] {
        let (mut reader, _) = slow_client(&broker, protocol, "quitter");
        reader.subscribe("bulk/#", QoS::AtLeastOnce);
        let first = reader.expect_publish();
        reader.acknowledge(&first);
        let id = reader.next_packet_id();
        let unsubscribe = codec::Unsubscribe {
            packet_id: crate::client::pid(id),
            filters: vec![crate::client::s("bulk/#")],
            properties: Default::default(),
        };
        reader.send(&Packet::Unsubscribe(unsubscribe));
        let before = publishes_until(&mut reader, "UNSUBACK", |p| {
            matches!(p, Packet::UnsubAck(_))
        });
        assert!(before + 1 < RETAINED, "stopped midway ({before} sent)");
        let after = reader.drain_publishes(true);
        assert!(after.is_empty(), "{} copies after UNSUBACK", after.len());
        reader.disconnect();
    }
    assert_eq!(broker.metrics().messages_dropped, 0, "nothing dropped");
    // Readers that go away midway: the broker serves on, a new reader gets them all (copies
    // sent into a closed connection before the broker saw it go are counted as dropped).
    for protocol in [V311, V5] {
        let (mut leaver, _) = slow_client(&broker, protocol, "leaver");
        leaver.subscribe("#", QoS::AtMostOnce);
        leaver.expect_publish();
        leaver.drop_abruptly();
    }
    let (mut reader, _) = slow_client(&broker, V5, "after-leavers");
    reader.subscribe("#", QoS::AtLeastOnce);
    let seen = read_all_slowly(&mut reader);
    assert!(seen.values().all(|&n| n == 1));
}

#[test]
fn a_message_cleared_or_replaced_after_the_subscribe_is_sent_as_it_is_then() {
    let broker = TestBroker::with_config(CONFIG);
    store_retained(&broker);
    let (mut reader, _) = slow_client(&broker, V5, "late-reader");
    // QoS 1: the live copies of the changes wait in the session's queue, never dropped.
    reader.subscribe("bulk/#", QoS::AtLeastOnce);
    // The reader does not read: its delivery waits near the start while these change.
    let (last, replaced) = (topic_of(RETAINED - 1), topic_of(RETAINED - 2));
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "changer");
    let clear = Publish {
        retain: true,
        ..publish_packet(&last, b"", QoS::AtLeastOnce, Some(1))
    };
    publisher.publish(clear);
    let replace = Publish {
        retain: true,
        ..publish_packet(&replaced, b"new", QoS::AtLeastOnce, Some(2))
    };
    publisher.publish(replace);
    publisher.ping();
    let mut retained_copies: HashMap<String, Vec<u8>> = HashMap::new();
    let mut live = Vec::new();
    let started = Instant::now();
    while retained_copies.len() < RETAINED - 2 {
        assert!(started.elapsed() < DEADLINE, "in time");
        let publish = reader.expect_publish();
        reader.acknowledge(&publish);
        let topic = publish.topic().to_owned();
        if publish.retain {
            let again = retained_copies.insert(topic.clone(), publish.payload().to_vec());
            assert!(again.is_none(), "{topic} twice");
        } else {
            live.push((topic, publish.payload().to_vec()));
        }
    }
    reader.ping();
    assert!(
        !retained_copies.contains_key(&last),
        "cleared before the delivery reached it: not sent"
    );
    assert!(
        !retained_copies.contains_key(&replaced),
        "replaced after the SUBSCRIBE: came live, not again as retained"
    );
    assert!(
        live.contains(&(replaced.clone(), b"new".to_vec())),
        "{live:?}"
    );
    assert!(live.contains(&(last.clone(), Vec::new())), "{live:?}");
}

#[test]
fn a_new_subscribe_to_the_same_filter_starts_the_delivery_over() {
    let broker = TestBroker::with_config(CONFIG);
    store_retained(&broker);
    for protocol in [V311, V5] {
        let (mut reader, _) = slow_client(&broker, protocol, "resubscriber");
        reader.subscribe("bulk/#", QoS::AtLeastOnce);
        for _ in 0..10 {
            let publish = reader.expect_publish();
            reader.acknowledge(&publish);
        }
        let id = reader.next_packet_id();
        let again = crate::client::subscribe_packet(
            id,
            "bulk/#",
            crate::client::qos_options(QoS::AtLeastOnce),
        );
        reader.send(&Packet::Subscribe(again));
        // What the first delivery sent comes before the second SUBACK; all of it after.
        publishes_until(&mut reader, "the second SUBACK", |p| {
            matches!(p, Packet::SubAck(_))
        });
        let seen = read_all_slowly(&mut reader);
        assert!(seen.values().all(|&n| n == 1), "each once after the SUBACK");
        assert!(reader.drain_publishes(true).is_empty(), "and nothing more");
        reader.disconnect();
    }
    assert_eq!(broker.metrics().messages_dropped, 0, "nothing dropped");
}
