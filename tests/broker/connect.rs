//! CONNECT rules: client identifiers, protocol levels, the first packet, a second CONNECT and
//! the CONNECT timeout.

use codec::{Packet, ReasonCode};

use crate::client::{RawClient, V5, V311, connect_frame, connect_packet};
use crate::harness::TestBroker;

/// A CONNECT for "MQTT" with any protocol level, clean session, keep-alive 0, client id "c".
fn raw_connect(level: u8) -> Vec<u8> {
    let properties: &[u8] = if level == 5 { &[0x00] } else { &[] };
    let rest = [&[0x00, 0x00][..], properties, &[0x00, 0x01, b'c']].concat();
    connect_frame(level, 0x02, &rest)
}

#[test]
fn v5_empty_client_id_gets_an_assigned_identifier() {
    let broker = TestBroker::start();
    let mut ids = Vec::new();
    for clean in [true, false] {
        let (mut client, connack) =
            RawClient::connect(broker.addr(), connect_packet(V5, "", clean));
        assert_eq!(connack.reason_code, ReasonCode::Success);
        let assigned = connack
            .properties
            .assigned_client_identifier
            .expect("Assigned Client Identifier in CONNACK");
        assert!(!assigned.is_empty());
        client.ping();
        ids.push(assigned);
    }
    assert_ne!(ids[0], ids[1], "assigned identifiers are unique");
}

#[test]
fn v311_empty_client_id_needs_clean_session() {
    let broker = TestBroker::start();
    let (mut accepted, connack) = RawClient::connect(broker.addr(), connect_packet(V311, "", true));
    assert_eq!(connack.reason_code, ReasonCode::Success);
    assert_eq!(connack.properties.assigned_client_identifier, None);
    accepted.ping();

    let (mut refused, connack) = RawClient::connect(broker.addr(), connect_packet(V311, "", false));
    // 0x02 Identifier rejected (decoded as the 5.0 code with the same meaning).
    assert_eq!(connack.reason_code, ReasonCode::ClientIdentifierNotValid);
    assert!(!connack.session_present);
    assert!(refused.expect_closed().is_empty());
    broker.assert_serving();
}

#[test]
fn too_long_client_id_is_refused_in_both_versions() {
    let broker = TestBroker::with_config("[connection]\nmax_client_id_len = 23\n");
    let long = "x".repeat(24);
    for protocol in [V311, V5] {
        let (mut client, connack) =
            RawClient::connect(broker.addr(), connect_packet(protocol, &long, true));
        assert_eq!(connack.reason_code, ReasonCode::ClientIdentifierNotValid);
        assert!(client.expect_closed().is_empty());
    }
    RawClient::connected_clean(broker.addr(), V5, &"y".repeat(23)).ping();
}

#[test]
fn unsupported_protocol_level_gets_return_code_1_then_close() {
    let broker = TestBroker::start();
    for level in [2u8, 6, 7] {
        let mut client = RawClient::open(broker.addr(), V311);
        client.send_raw(&raw_connect(level));
        let before = client.expect_closed();
        // 3.1.1 CONNACK 0x01 "unacceptable protocol version" (0x84 in 5.0 terms).
        match before.as_slice() {
            [Packet::ConnAck(ack)] => {
                assert_eq!(ack.reason_code, ReasonCode::UnsupportedProtocolVersion)
            }
            other => panic!("level {level}: expected one CONNACK, got {other:?}"),
        }
    }
    broker.assert_serving();
}

#[test]
fn raw_connect_levels_4_and_5_are_accepted() {
    let broker = TestBroker::start();
    for (level, protocol) in [(4u8, V311), (5, V5)] {
        let mut client = RawClient::open(broker.addr(), protocol);
        client.send_raw(&raw_connect(level));
        assert_eq!(client.expect_connack().reason_code, ReasonCode::Success);
        client.disconnect();
    }
}

#[test]
fn second_connect_is_a_protocol_error() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut client = RawClient::connected_clean(broker.addr(), protocol, "twice");
        client.send(&Packet::from(connect_packet(protocol, "twice", true)));
        client.expect_disconnect(ReasonCode::ProtocolError);
    }
    broker.assert_serving();
}

#[test]
fn packet_before_connect_closes_the_connection_without_a_reply() {
    let broker = TestBroker::start();
    let first_packets: [&[u8]; 4] = [
        &[0xC0, 0x00],                                     // PINGREQ
        &[0x30, 0x05, 0x00, 0x01, b't', b'h', b'i'],       // PUBLISH QoS 0
        &[0x82, 0x06, 0x00, 0x01, 0x00, 0x01, b'#', 0x00], // SUBSCRIBE
        &[0xE0, 0x00],                                     // DISCONNECT
    ];
    for bytes in first_packets {
        let mut client = RawClient::open(broker.addr(), V311);
        client.send_raw(bytes);
        let before = client.expect_closed();
        assert!(
            before.is_empty(),
            "first packet {bytes:02x?} is not CONNECT: the connection is closed, got {before:?}"
        );
    }
    broker.assert_serving();
}

#[test]
fn silent_socket_is_closed_after_the_connect_timeout() {
    let broker = TestBroker::with_config("[connection]\nconnect_timeout = 1\n");
    let mut silent = RawClient::open(broker.addr(), V311);
    let mut partial = RawClient::open(broker.addr(), V311);
    partial.send_raw(&raw_connect(4)[..6]);
    assert!(silent.expect_closed().is_empty());
    assert!(partial.expect_closed().is_empty());
    broker.assert_serving();
}

#[test]
fn keep_alive_above_the_maximum_is_lowered_with_server_keep_alive() {
    let broker = TestBroker::with_config("[connection]\nmax_keep_alive = 30\n");
    let mut connect = connect_packet(V5, "ka", true);
    connect.keep_alive = 600;
    let (_client, connack) = RawClient::connect(broker.addr(), connect);
    assert_eq!(connack.reason_code, ReasonCode::Success);
    assert_eq!(connack.properties.server_keep_alive, Some(30));

    let mut within = connect_packet(V5, "ka2", true);
    within.keep_alive = 20;
    let (_client, connack) = RawClient::connect(broker.addr(), within);
    assert_eq!(connack.properties.server_keep_alive, None);
}

#[test]
fn v5_connack_announces_the_broker_limits() {
    let broker = TestBroker::with_config(
        "[limits]\nreceive_maximum = 7\nmax_packet_size = 4096\ntopic_alias_maximum = 3\n",
    );
    let (_client, connack) = RawClient::connect(broker.addr(), connect_packet(V5, "limits", true));
    let props = connack.properties;
    assert_eq!(props.receive_maximum.map(|v| v.get()), Some(7));
    assert_eq!(props.maximum_packet_size.map(|v| v.get()), Some(4096));
    assert_eq!(props.topic_alias_maximum, Some(3));
}

#[test]
fn session_present_reflects_a_kept_session() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let id = format!("sp-{}", protocol.level());
        let mut first = connect_packet(protocol, &id, false);
        first.properties.session_expiry_interval = protocol.is_v5().then_some(60);
        let (client, connack) = RawClient::connect(broker.addr(), first.clone());
        assert!(!connack.session_present);
        client.disconnect();
        let (client, connack) = RawClient::connect(broker.addr(), first);
        assert!(connack.session_present, "{protocol:?}: session kept");
        client.disconnect();
        let (client, connack) =
            RawClient::connect(broker.addr(), connect_packet(protocol, &id, true));
        assert!(
            !connack.session_present,
            "{protocol:?}: clean start discards it"
        );
        client.disconnect();
    }
}
