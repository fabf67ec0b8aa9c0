//! A corpus of malformed and forbidden packets. After CONNECT, each one ends the connection: a
//! 5.0 client gets DISCONNECT with the right reason code first, a 3.1.1 client just a close. A bad
//! CONNECT gets a CONNACK only where the protocol allows one. The broker keeps serving others.

use codec::{Packet, QoS, ReasonCode};

use crate::client::{RawClient, V5, V311, connect_frame, connect_packet};
use crate::harness::TestBroker;

use ReasonCode::{MalformedPacket as MALFORMED, ProtocolError as PROTOCOL};

/// 5.0 frames sent after a successful CONNECT, with the DISCONNECT reason they must cause.
#[rustfmt::skip]
const V5_CORPUS: &[(&str, &[u8], ReasonCode)] = &[
    ("reserved packet type 0", &[0x00, 0x00], MALFORMED),
    (
        "PUBLISH QoS 3",
        &[0x36, 0x05, 0x00, 0x01, b't', 0x00, b'x'],
        MALFORMED,
    ),
    (
        "SUBSCRIBE flags 0000",
        &[0x80, 0x07, 0x00, 0x01, 0x00, 0x00, 0x01, b'a', 0x00],
        MALFORMED,
    ),
    (
        "remaining length of 5 bytes",
        &[0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
        MALFORMED,
    ),
    (
        "wildcard in topic name",
        &[0x30, 0x07, 0x00, 0x03, b'a', b'/', b'#', 0x00, b'x'],
        ReasonCode::TopicNameInvalid,
    ),
    (
        "topic not UTF-8",
        &[0x30, 0x06, 0x00, 0x02, 0xC3, 0x28, 0x00, b'x'],
        MALFORMED,
    ),
    (
        "U+0000 in topic",
        &[0x30, 0x06, 0x00, 0x02, b'a', 0x00, 0x00, b'x'],
        MALFORMED,
    ),
    (
        "QoS 1 PUBLISH with packet id 0",
        &[0x32, 0x07, 0x00, 0x01, b't', 0x00, 0x00, 0x00, b'x'],
        PROTOCOL,
    ),
    (
        "DUP on QoS 0",
        &[0x38, 0x05, 0x00, 0x01, b't', 0x00, b'x'],
        MALFORMED,
    ),
    (
        "unknown property 0x7F",
        &[0x30, 0x07, 0x00, 0x01, b't', 0x02, 0x7F, 0x00, b'x'],
        MALFORMED,
    ),
    (
        "property twice",
        &[
            0x30, 0x09, 0x00, 0x01, b't', 0x04, 0x01, 0x00, 0x01, 0x00, b'x',
        ],
        PROTOCOL,
    ),
    (
        "property block longer than the packet",
        &[0x30, 0x05, 0x00, 0x01, b't', 0x09, b'x'],
        MALFORMED,
    ),
    (
        "topic longer than the packet",
        &[0x30, 0x03, 0x00, 0x09, b't'],
        MALFORMED,
    ),
    (
        "empty topic without alias",
        &[0x30, 0x04, 0x00, 0x00, 0x00, b'x'],
        PROTOCOL,
    ),
    (
        "CONNACK from a client",
        &[0x20, 0x03, 0x00, 0x00, 0x00],
        PROTOCOL,
    ),
    ("AUTH without a method", &[0xF0, 0x00], PROTOCOL),
    ("PUBACK cut short", &[0x40, 0x01, 0x00], MALFORMED),
    ("PUBREL flags 0000", &[0x60, 0x02, 0x00, 0x01], MALFORMED),
    (
        "SUBSCRIBE without filters",
        &[0x82, 0x03, 0x00, 0x01, 0x00],
        PROTOCOL,
    ),
    (
        "subscription options reserved bits",
        &[0x82, 0x07, 0x00, 0x01, 0x00, 0x00, 0x01, b'a', 0xC0],
        MALFORMED,
    ),
    (
        "retain handling 3",
        &[0x82, 0x07, 0x00, 0x01, 0x00, 0x00, 0x01, b'a', 0x30],
        PROTOCOL,
    ),
    (
        "subscription identifier 0",
        &[
            0x82, 0x09, 0x00, 0x01, 0x02, 0x0B, 0x00, 0x00, 0x01, b'a', 0x00,
        ],
        PROTOCOL,
    ),
    (
        "UNSUBSCRIBE without filters",
        &[0xA2, 0x03, 0x00, 0x01, 0x00],
        PROTOCOL,
    ),
    ("PINGREQ with a body", &[0xC0, 0x01, 0x00], MALFORMED),
    (
        "DISCONNECT with unknown reason 0x03",
        &[0xE0, 0x01, 0x03],
        MALFORMED,
    ),
];

/// 3.1.1 frames sent after a successful CONNECT: each must close the connection.
#[rustfmt::skip]
const V311_CORPUS: &[(&str, &[u8])] = &[
    ("reserved packet type 0", &[0x00, 0x00]),
    ("PUBLISH QoS 3", &[0x36, 0x04, 0x00, 0x01, b't', b'x']),
    (
        "SUBSCRIBE flags 0000",
        &[0x80, 0x06, 0x00, 0x01, 0x00, 0x01, b'a', 0x00],
    ),
    (
        "remaining length of 5 bytes",
        &[0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
    ),
    (
        "wildcard in topic name",
        &[0x30, 0x06, 0x00, 0x03, b'a', b'/', b'+', b'x'],
    ),
    (
        "topic not UTF-8",
        &[0x30, 0x05, 0x00, 0x02, 0xC3, 0x28, b'x'],
    ),
    (
        "U+0000 in topic",
        &[0x30, 0x05, 0x00, 0x02, b'a', 0x00, b'x'],
    ),
    (
        "QoS 1 PUBLISH with packet id 0",
        &[0x32, 0x06, 0x00, 0x01, b't', 0x00, 0x00, b'x'],
    ),
    ("DUP on QoS 0", &[0x38, 0x04, 0x00, 0x01, b't', b'x']),
    ("empty topic", &[0x30, 0x03, 0x00, 0x00, b'x']),
    ("AUTH (reserved in 3.1.1)", &[0xF0, 0x00]),
    ("CONNACK from a client", &[0x20, 0x02, 0x00, 0x00]),
    ("PUBACK cut short", &[0x40, 0x01, 0x00]),
    ("SUBSCRIBE without filters", &[0x82, 0x02, 0x00, 0x01]),
    (
        "subscription options reserved bits",
        &[0x82, 0x06, 0x00, 0x01, 0x00, 0x01, b'a', 0x04],
    ),
    ("PINGREQ with a body", &[0xC0, 0x01, 0x00]),
    ("DISCONNECT with a body", &[0xE0, 0x01, 0x00]),
];

#[test]
fn v5_malformed_packets_get_disconnect_with_the_reason_code() {
    let broker = TestBroker::start();
    for (name, bytes, reason) in V5_CORPUS {
        let mut client = RawClient::connected_clean(broker.addr(), V5, "malformed");
        client.send_raw(bytes);
        let before = client.expect_closed();
        match before.as_slice() {
            [Packet::Disconnect(d)] => assert_eq!(
                d.reason_code,
                *reason,
                "{name}: expected {}, got {}",
                reason.name(),
                d.reason_code.name()
            ),
            other => panic!(
                "{name}: expected DISCONNECT {}, got {other:?}",
                reason.name()
            ),
        }
    }
    broker.assert_serving();
}

#[test]
fn v311_malformed_packets_close_the_connection() {
    let broker = TestBroker::start();
    for (name, bytes) in V311_CORPUS {
        let mut client = RawClient::connected_clean(broker.addr(), V311, "malformed");
        client.send_raw(bytes);
        let before = client.expect_closed();
        assert!(
            before.is_empty(),
            "{name}: closed without a reply, got {before:?}"
        );
    }
    broker.assert_serving();
}

#[test]
fn v311_malformed_connect_is_closed_without_connack() {
    let broker = TestBroker::start();
    let cases: [(&str, Vec<u8>); 3] = [
        (
            "reserved flag",
            connect_frame(4, 0x03, &[0x00, 0x00, 0x00, 0x01, b'c']),
        ),
        (
            "will QoS without will flag",
            connect_frame(4, 0x0A, &[0x00, 0x00, 0x00, 0x01, b'c']),
        ),
        (
            "password without user name",
            connect_frame(4, 0x42, &[0x00, 0x00, 0x00, 0x01, b'c', 0x00, 0x01, b'p']),
        ),
    ];
    for (name, frame) in cases {
        let mut client = RawClient::open(broker.addr(), V311);
        client.send_raw(&frame);
        let before = client.expect_closed();
        assert!(
            before.is_empty(),
            "{name}: no CONNACK for a malformed CONNECT, got {before:?}"
        );
    }
    broker.assert_serving();
}

#[test]
fn v5_malformed_connect_gets_a_v5_connack_or_a_close() {
    let broker = TestBroker::start();
    let cases: [(&str, Vec<u8>, ReasonCode); 3] = [
        (
            "reserved flag",
            connect_frame(5, 0x03, &[0x00, 0x00, 0x00, 0x00, 0x01, b'c']),
            MALFORMED,
        ),
        (
            "will QoS without will flag",
            connect_frame(5, 0x0A, &[0x00, 0x00, 0x00, 0x00, 0x01, b'c']),
            MALFORMED,
        ),
        (
            "property twice",
            connect_frame(
                5,
                0x02,
                &[
                    0x00, 0x00, 0x06, 0x21, 0x00, 0x05, 0x21, 0x00, 0x05, 0x00, 0x01, b'c',
                ],
            ),
            PROTOCOL,
        ),
    ];
    for (name, frame, reason) in cases {
        let mut client = RawClient::open(broker.addr(), V5);
        client.send_raw(&frame);
        match client.expect_closed().as_slice() {
            [] => {}
            [Packet::ConnAck(ack)] => assert_eq!(ack.reason_code, reason, "{name}"),
            other => panic!(
                "{name}: expected a 5.0 CONNACK {} or a close, got {other:?}",
                reason.name()
            ),
        }
    }
    broker.assert_serving();
}

#[test]
fn frames_split_byte_by_byte_and_coalesced_are_both_decoded() {
    let broker = TestBroker::start();
    let mut sub = RawClient::connected_clean(broker.addr(), V5, "framing-sub");
    sub.subscribe("frames/+", QoS::AtMostOnce);
    let mut publisher = RawClient::open(broker.addr(), V5);
    let mut bytes = bytes::BytesMut::new();
    let packets = [
        Packet::from(connect_packet(V5, "framing-pub", true)),
        Packet::Publish(crate::client::publish_packet(
            "frames/1",
            &[7u8; 300],
            QoS::AtMostOnce,
            None,
        )),
    ];
    for packet in &packets {
        codec::encode(packet, V5, &mut bytes).expect("encodes");
    }
    for byte in bytes.iter() {
        publisher.send_raw(&[*byte]);
    }
    assert_eq!(publisher.expect_connack().reason_code, ReasonCode::Success);
    assert_eq!(sub.expect_publish().payload().len(), 300);

    // Several packets in one write.
    let mut burst = bytes::BytesMut::new();
    for i in 2..6 {
        let publish =
            crate::client::publish_packet(&format!("frames/{i}"), b"b", QoS::AtMostOnce, None);
        codec::encode(&Packet::Publish(publish), V5, &mut burst).expect("encodes");
    }
    publisher.send_raw(&burst);
    for i in 2..6 {
        assert_eq!(sub.expect_publish().topic(), format!("frames/{i}").as_str());
    }
}
