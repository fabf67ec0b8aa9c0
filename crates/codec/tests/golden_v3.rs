//! Golden fixtures for MQTT 3.1 and 3.1.1: every packet type, decoded and encoded byte for
//! byte, including the examples of the 3.1.1 specification.

mod common;

use bytes::Bytes;
use codec::{
    AckProperties, ConnAck, ConnAckProperties, Connect, ConnectProperties, Disconnect, Packet,
    PingReq, PingResp, ProtocolVersion, PubAck, PubComp, PubRec, PubRel, Publish,
    PublishProperties, QoS, ReasonCode, SubAck, Subscribe, SubscribeProperties,
    SubscriptionOptions, UnsubAck, Unsubscribe, UnsubscribeProperties, Will, WillProperties,
};
use common::{assert_golden, pid, s};

const V4: ProtocolVersion = ProtocolVersion::V3_1_1;

fn connect(protocol: ProtocolVersion, client_id: &'static str) -> Connect {
    Connect {
        protocol,
        clean_start: true,
        keep_alive: 60,
        client_id: s(client_id),
        will: None,
        username: None,
        password: None,
        properties: ConnectProperties::default(),
    }
}

#[test]
fn connect_minimal() {
    let wire = "10 0E 00 04 4D 51 54 54 04 02 00 3C 00 02 63 31";
    assert_golden(wire, V4, Packet::from(connect(V4, "c1")));
}

#[test]
fn connect_mqtt_3_1_uses_mqisdp() {
    let v3 = ProtocolVersion::V3_1;
    let wire = "10 10 00 06 4D 51 49 73 64 70 03 02 00 3C 00 02 63 31";
    assert_golden(wire, v3, Packet::from(connect(v3, "c1")));
}

#[test]
fn connect_with_will_and_credentials_uses_the_specification_flags() {
    // Figure 3.6 of MQTT 3.1.1: flags 0xCE (user name, password, will QoS 1, will, clean
    // session), keep alive 10.
    let wire = "10 1F 00 04 4D 51 54 54 04 CE 00 0A 00 02 69 64 00 03 77 2F 74 00 03 62 79 65 \
                00 01 75 00 02 70 77";
    let packet = Connect {
        keep_alive: 10,
        will: Some(Will {
            topic: s("w/t"),
            payload: Bytes::from_static(b"bye"),
            qos: QoS::AtLeastOnce,
            retain: false,
            properties: WillProperties::default(),
        }),
        username: Some(s("u")),
        password: Some(Bytes::from_static(b"pw")),
        ..connect(V4, "id")
    };
    assert_golden(wire, V4, Packet::from(packet));
}

#[test]
fn connack_return_codes() {
    let ack = |session_present, reason_code| {
        Packet::from(ConnAck {
            session_present,
            reason_code,
            properties: ConnAckProperties::default(),
        })
    };
    assert_golden("20 02 01 00", V4, ack(true, ReasonCode::Success));
    assert_golden("20 02 00 05", V4, ack(false, ReasonCode::NotAuthorized));
    assert_golden(
        "20 02 00 01",
        V4,
        ack(false, ReasonCode::UnsupportedProtocolVersion),
    );
    assert_golden(
        "20 02 00 02",
        V4,
        ack(false, ReasonCode::ClientIdentifierNotValid),
    );
    assert_golden("20 02 00 03", V4, ack(false, ReasonCode::ServerUnavailable));
    assert_golden(
        "20 02 00 04",
        V4,
        ack(false, ReasonCode::BadUserNameOrPassword),
    );
}

#[test]
fn publish_qos0() {
    let packet = Publish {
        dup: false,
        qos: QoS::AtMostOnce,
        retain: false,
        content: codec::TopicPayload::new(s("a/b"), Bytes::from_static(b"hi")),
        packet_id: None,
        properties: PublishProperties::default().into(),
    };
    assert_golden("30 07 00 03 61 2F 62 68 69", V4, Packet::Publish(packet));
}

#[test]
fn publish_qos1_dup_retain_with_the_specification_variable_header() {
    // Figure 3.11 of MQTT 3.1.1: topic "a/b", packet identifier 10.
    let packet = Publish {
        dup: true,
        qos: QoS::AtLeastOnce,
        retain: true,
        content: codec::TopicPayload::new(s("a/b"), Bytes::from_static(b"hi")),
        packet_id: Some(pid(10)),
        properties: PublishProperties::default().into(),
    };
    assert_golden(
        "3B 09 00 03 61 2F 62 00 0A 68 69",
        V4,
        Packet::Publish(packet),
    );
}

#[test]
fn publish_qos2_without_payload() {
    let packet = Publish {
        dup: false,
        qos: QoS::ExactlyOnce,
        retain: false,
        content: codec::TopicPayload::new(s("t"), Bytes::new()),
        packet_id: Some(pid(0xFFFF)),
        properties: PublishProperties::default().into(),
    };
    assert_golden("34 05 00 01 74 FF FF", V4, Packet::Publish(packet));
}

#[test]
fn acknowledgements() {
    assert_golden("40 02 00 0A", V4, Packet::PubAck(PubAck::new(pid(10))));
    assert_golden("50 02 00 0A", V4, Packet::PubRec(PubRec::new(pid(10))));
    assert_golden("62 02 00 0A", V4, Packet::PubRel(PubRel::new(pid(10))));
    assert_golden("70 02 01 02", V4, Packet::PubComp(PubComp::new(pid(258))));
}

#[test]
fn subscribe_specification_example() {
    // Figure 3.22 of MQTT 3.1.1: "a/b" at QoS 1 and "c/d" at QoS 2, packet identifier 10.
    let options = |qos| SubscriptionOptions {
        qos,
        ..SubscriptionOptions::default()
    };
    let packet = Subscribe {
        packet_id: pid(10),
        filters: vec![
            (s("a/b"), options(QoS::AtLeastOnce)),
            (s("c/d"), options(QoS::ExactlyOnce)),
        ],
        properties: SubscribeProperties::default(),
    };
    let wire = "82 0E 00 0A 00 03 61 2F 62 01 00 03 63 2F 64 02";
    assert_golden(wire, V4, Packet::Subscribe(packet));
}

#[test]
fn suback_specification_example() {
    // Figure 3.26 of MQTT 3.1.1: granted 0, 1, 2 and failure.
    let packet = SubAck {
        packet_id: pid(10),
        reason_codes: vec![
            ReasonCode::GRANTED_QOS_0,
            ReasonCode::GrantedQoS1,
            ReasonCode::GrantedQoS2,
            ReasonCode::UnspecifiedError,
        ],
        properties: AckProperties::default(),
    };
    assert_golden("90 06 00 0A 00 01 02 80", V4, Packet::SubAck(packet));
}

#[test]
fn suback_maps_every_5_0_error_to_the_3_1_1_failure_code() {
    let packet = Packet::SubAck(SubAck {
        packet_id: pid(1),
        reason_codes: vec![ReasonCode::TopicFilterInvalid, ReasonCode::NotAuthorized],
        properties: AckProperties::default(),
    });
    assert_eq!(
        common::encode_one(&packet, V4),
        common::hex("90 04 00 01 80 80")
    );
}

#[test]
fn unsubscribe_specification_example() {
    // Figure 3.30 of MQTT 3.1.1: "a/b" and "c/d".
    let packet = Unsubscribe {
        packet_id: pid(10),
        filters: vec![s("a/b"), s("c/d")],
        properties: UnsubscribeProperties::default(),
    };
    let wire = "A2 0C 00 0A 00 03 61 2F 62 00 03 63 2F 64";
    assert_golden(wire, V4, Packet::Unsubscribe(packet));
}

#[test]
fn unsuback_has_no_reason_codes() {
    let packet = UnsubAck {
        packet_id: pid(10),
        reason_codes: Vec::new(),
        properties: AckProperties::default(),
    };
    assert_golden("B0 02 00 0A", V4, Packet::UnsubAck(packet));
}

#[test]
fn ping_and_disconnect() {
    assert_golden("C0 00", V4, Packet::PingReq(PingReq));
    assert_golden("D0 00", V4, Packet::PingResp(PingResp));
    assert_golden("E0 00", V4, Packet::Disconnect(Disconnect::default()));
}

#[test]
fn five_point_zero_content_is_dropped_for_3_1_1() {
    let ack = PubAck {
        reason_code: ReasonCode::NoMatchingSubscribers,
        properties: AckProperties {
            reason_string: Some(s("none")),
            user_properties: vec![(s("k"), s("v"))],
        },
        ..PubAck::new(pid(10))
    };
    assert_eq!(
        common::encode_one(&Packet::PubAck(ack), V4),
        common::hex("40 02 00 0A")
    );
    let disconnect = Disconnect {
        reason_code: ReasonCode::ServerShuttingDown,
        ..Disconnect::default()
    };
    let wire = common::encode_one(&Packet::Disconnect(disconnect), V4);
    assert_eq!(wire, common::hex("E0 00"));
}

#[test]
fn connack_codes_without_a_3_1_1_return_code_are_refused() {
    let ack = Packet::from(ConnAck {
        session_present: false,
        reason_code: ReasonCode::Banned,
        properties: ConnAckProperties::default(),
    });
    let mut buf = bytes::BytesMut::from(&b"keep"[..]);
    let err = codec::encode(&ack, V4, &mut buf).expect_err("Banned has no 3.1.1 return code");
    assert!(matches!(
        err,
        codec::EncodeError::ReasonNotRepresentable { .. }
    ));
    assert_eq!(&buf[..], b"keep", "nothing written on error");
}
