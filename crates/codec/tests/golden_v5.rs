//! Golden fixtures for MQTT 5.0: every packet type with and without properties, decoded and
//! encoded byte for byte, including the examples of the 5.0 specification.

mod common;

use std::num::NonZeroU16;

use bytes::Bytes;
use codec::{
    AckProperties, Auth, AuthProperties, ConnAck, ConnAckProperties, Connect, ConnectProperties,
    Disconnect, DisconnectProperties, Packet, PayloadFormat, PingReq, PingResp, ProtocolVersion,
    PubAck, PubComp, PubRec, PubRel, Publish, PublishProperties, QoS, ReasonCode, RetainHandling,
    SubAck, Subscribe, SubscribeProperties, SubscriptionId, SubscriptionOptions, UnsubAck,
    Unsubscribe, UnsubscribeProperties, Will, WillProperties,
};
use common::{assert_golden, decode_one, hex, pid, s};

const V5: ProtocolVersion = ProtocolVersion::V5;

fn sub_id(value: u32) -> SubscriptionId {
    SubscriptionId::new(value).expect("valid subscription id")
}

fn nz(value: u16) -> NonZeroU16 {
    NonZeroU16::new(value).expect("non-zero")
}

#[test]
fn connect_specification_variable_header() {
    // Figure 3-6 of MQTT 5.0: level 5, flags 0xC2 (user name, password, clean start), keep
    // alive 10, properties: Session Expiry Interval 10.
    let wire = "10 1B 00 04 4D 51 54 54 05 C2 00 0A 05 11 00 00 00 0A 00 02 69 64 00 01 75 \
                00 02 70 77";
    let packet = Connect {
        protocol: V5,
        clean_start: true,
        keep_alive: 10,
        client_id: s("id"),
        will: None,
        username: Some(s("u")),
        password: Some(Bytes::from_static(b"pw")),
        properties: ConnectProperties {
            session_expiry_interval: Some(10),
            ..ConnectProperties::default()
        },
    };
    assert_golden(wire, V5, Packet::from(packet));
}

#[test]
fn connect_with_will_properties_and_user_property() {
    let wire = "10 2D 00 04 4D 51 54 54 05 2E 00 3C \
                0D 21 00 14 22 00 0A 26 00 01 6B 00 01 76 \
                00 01 63 \
                0B 18 00 00 00 05 01 01 03 00 01 74 \
                00 01 77 00 01 78";
    let packet = Connect {
        protocol: V5,
        clean_start: true,
        keep_alive: 60,
        client_id: s("c"),
        will: Some(Will {
            topic: s("w"),
            payload: Bytes::from_static(b"x"),
            qos: QoS::AtLeastOnce,
            retain: true,
            properties: WillProperties {
                will_delay_interval: Some(5),
                payload_format: Some(PayloadFormat::Utf8),
                content_type: Some(s("t")),
                ..WillProperties::default()
            },
        }),
        username: None,
        password: None,
        properties: ConnectProperties {
            receive_maximum: NonZeroU16::new(20),
            topic_alias_maximum: Some(10),
            user_properties: vec![(s("k"), s("v"))],
            ..ConnectProperties::default()
        },
    };
    assert_golden(wire, V5, Packet::from(packet));
}

#[test]
fn connect_allows_password_without_user_name_and_empty_client_id() {
    let wire = "10 12 00 04 4D 51 54 54 05 40 00 00 00 00 00 00 03 01 02 03";
    let packet = Connect {
        protocol: V5,
        clean_start: false,
        keep_alive: 0,
        client_id: s(""),
        will: None,
        username: None,
        password: Some(Bytes::from_static(&[1, 2, 3])),
        properties: ConnectProperties::default(),
    };
    assert_golden(wire, V5, Packet::from(packet));
}

#[test]
fn connack_with_properties() {
    let wire = "20 0D 00 00 0A 21 00 64 12 00 01 61 22 00 0A";
    let packet = ConnAck {
        session_present: false,
        reason_code: ReasonCode::Success,
        properties: ConnAckProperties {
            receive_maximum: NonZeroU16::new(100),
            assigned_client_identifier: Some(s("a")),
            topic_alias_maximum: Some(10),
            ..ConnAckProperties::default()
        },
    };
    assert_golden(wire, V5, Packet::from(packet));
}

#[test]
fn connack_refusal_and_capabilities() {
    let refused = ConnAck {
        session_present: false,
        reason_code: ReasonCode::NotAuthorized,
        properties: ConnAckProperties::default(),
    };
    assert_golden("20 03 00 87 00", V5, Packet::from(refused));
    let capabilities = ConnAck {
        session_present: true,
        reason_code: ReasonCode::Success,
        properties: ConnAckProperties {
            maximum_qos: Some(QoS::AtLeastOnce),
            retain_available: Some(false),
            wildcard_subscription_available: Some(true),
            subscription_identifiers_available: Some(false),
            shared_subscription_available: Some(true),
            server_keep_alive: Some(30),
            ..ConnAckProperties::default()
        },
    };
    let wire = "20 10 01 00 0D 24 01 25 00 28 01 29 00 2A 01 13 00 1E";
    assert_golden(wire, V5, Packet::from(capabilities));
}

#[test]
fn publish_specification_variable_header() {
    // Figure 3-9 of MQTT 5.0: topic "a/b", packet identifier 10, no properties.
    let packet = Publish {
        dup: false,
        qos: QoS::AtLeastOnce,
        retain: false,
        content: codec::TopicPayload::new(s("a/b"), Bytes::from_static(b"hi")),
        packet_id: Some(pid(10)),
        properties: PublishProperties::default().into(),
    };
    assert_golden(
        "32 0A 00 03 61 2F 62 00 0A 00 68 69",
        V5,
        Packet::Publish(packet),
    );
}

#[test]
fn publish_with_every_property() {
    let wire = "30 28 00 01 74 23 01 01 08 00 01 72 09 00 02 01 02 26 00 01 6B 00 01 76 \
                03 00 01 63 02 00 00 00 3C 23 00 05 0B 01 0B AC 02 78";
    let packet = Publish {
        dup: false,
        qos: QoS::AtMostOnce,
        retain: false,
        content: codec::TopicPayload::new(s("t"), Bytes::from_static(b"x")),
        packet_id: None,
        properties: PublishProperties {
            payload_format: Some(PayloadFormat::Utf8),
            message_expiry_interval: Some(60),
            topic_alias: Some(nz(5)),
            subscription_identifiers: vec![sub_id(1), sub_id(300)],
            application: codec::AppProperties::builder()
                .response_topic(Some(s("r")))
                .correlation_data(Some(Bytes::from_static(&[1, 2])))
                .user_property(s("k"), s("v"))
                .content_type(Some(s("c")))
                .build()
                .expect("valid"),
        }
        .into(),
    };
    assert_golden(wire, V5, Packet::Publish(packet));
}

#[test]
fn publish_with_topic_alias_and_empty_topic() {
    let packet = Publish {
        dup: false,
        qos: QoS::AtMostOnce,
        retain: false,
        content: codec::TopicPayload::new(s(""), Bytes::from_static(b"x")),
        packet_id: None,
        properties: PublishProperties {
            topic_alias: Some(nz(5)),
            ..PublishProperties::default()
        }
        .into(),
    };
    assert_golden("30 07 00 00 03 23 00 05 78", V5, Packet::Publish(packet));
}

#[test]
fn acknowledgements_short_and_long_forms() {
    assert_golden("40 02 00 0A", V5, Packet::PubAck(PubAck::new(pid(10))));
    let no_match = PubAck {
        reason_code: ReasonCode::NoMatchingSubscribers,
        ..PubAck::new(pid(10))
    };
    assert_golden("40 03 00 0A 10", V5, Packet::PubAck(no_match));
    let refused = PubAck {
        reason_code: ReasonCode::NotAuthorized,
        properties: AckProperties {
            reason_string: Some(s("x")),
            user_properties: Vec::new(),
        },
        ..PubAck::new(pid(10))
    };
    assert_golden("40 08 00 0A 87 04 1F 00 01 78", V5, Packet::PubAck(refused));
    let rec = PubRec {
        reason_code: ReasonCode::NoMatchingSubscribers,
        ..PubRec::new(pid(10))
    };
    assert_golden("50 03 00 0A 10", V5, Packet::PubRec(rec));
    let rel = PubRel {
        reason_code: ReasonCode::PacketIdentifierNotFound,
        ..PubRel::new(pid(10))
    };
    assert_golden("62 03 00 0A 92", V5, Packet::PubRel(rel));
    assert_golden("70 02 00 0A", V5, Packet::PubComp(PubComp::new(pid(10))));
}

#[test]
fn acknowledgement_with_explicit_success_and_empty_properties_decodes() {
    let decoded = decode_one(&hex("40 04 00 0A 00 00"), V5).expect("valid long form");
    assert_eq!(decoded, Packet::PubAck(PubAck::new(pid(10))));
}

#[test]
fn subscribe_with_options_and_identifier() {
    let packet = Subscribe {
        packet_id: pid(10),
        filters: vec![
            (
                s("a/+"),
                SubscriptionOptions {
                    qos: QoS::AtLeastOnce,
                    no_local: true,
                    retain_as_published: true,
                    retain_handling: RetainHandling::DoNotSend,
                },
            ),
            (s("#"), SubscriptionOptions::default()),
        ],
        properties: SubscribeProperties {
            subscription_identifier: Some(sub_id(7)),
            user_properties: Vec::new(),
        },
    };
    let wire = "82 0F 00 0A 02 0B 07 00 03 61 2F 2B 2D 00 01 23 00";
    assert_golden(wire, V5, Packet::Subscribe(packet));
}

#[test]
fn suback_and_unsuback() {
    let suback = SubAck {
        packet_id: pid(10),
        reason_codes: vec![ReasonCode::GrantedQoS1, ReasonCode::TopicFilterInvalid],
        properties: AckProperties::default(),
    };
    assert_golden("90 05 00 0A 00 01 8F", V5, Packet::SubAck(suback));
    let unsubscribe = Unsubscribe {
        packet_id: pid(10),
        filters: vec![s("a/b")],
        properties: UnsubscribeProperties::default(),
    };
    assert_golden(
        "A2 08 00 0A 00 00 03 61 2F 62",
        V5,
        Packet::Unsubscribe(unsubscribe),
    );
    let unsuback = UnsubAck {
        packet_id: pid(10),
        reason_codes: vec![ReasonCode::Success, ReasonCode::NoSubscriptionExisted],
        properties: AckProperties::default(),
    };
    assert_golden("B0 05 00 0A 00 00 11", V5, Packet::UnsubAck(unsuback));
}

#[test]
fn disconnect_forms() {
    assert_golden("E0 00", V5, Packet::Disconnect(Disconnect::default()));
    let with_will = Disconnect {
        reason_code: ReasonCode::DisconnectWithWillMessage,
        properties: DisconnectProperties::default(),
    };
    assert_golden("E0 01 04", V5, Packet::Disconnect(with_will));
    let taken_over = Disconnect {
        reason_code: ReasonCode::SessionTakenOver,
        properties: DisconnectProperties {
            reason_string: Some(s("x")),
            ..DisconnectProperties::default()
        },
    };
    assert_golden(
        "E0 06 8E 04 1F 00 01 78",
        V5,
        Packet::Disconnect(taken_over),
    );
}

#[test]
fn auth_exchange() {
    assert_golden("F0 00", V5, Packet::Auth(Auth::default()));
    let step = Auth {
        reason_code: ReasonCode::ContinueAuthentication,
        properties: AuthProperties {
            authentication_method: Some(s("SCRAM")),
            authentication_data: Some(Bytes::from_static(&[0xAB])),
            ..AuthProperties::default()
        },
    };
    let wire = "F0 0E 18 0C 15 00 05 53 43 52 41 4D 16 00 01 AB";
    assert_golden(wire, V5, Packet::Auth(step));
}

#[test]
fn pings() {
    assert_golden("C0 00", V5, Packet::PingReq(PingReq));
    assert_golden("D0 00", V5, Packet::PingResp(PingResp));
}
