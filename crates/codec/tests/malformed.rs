//! One test per malformed-input rule: each asserts the exact error and its reason code.

mod common;

use bytes::{Bytes, BytesMut};
use codec::{DecodeError as E, Limits, Packet, PacketType, PropertyId, ProtocolVersion, decode};
use common::{assert_rejected, connect_v5, decode_one, frame, hex, props};

const V3: ProtocolVersion = ProtocolVersion::V3_1_1;
const V5: ProtocolVersion = ProtocolVersion::V5;
const MALFORMED: u8 = 0x81;
const PROTOCOL_ERROR: u8 = 0x82;

fn publish_v5(props_hex: &str) -> String {
    frame(0x30, &format!("00 01 74 {} 78", props(props_hex)))
}

#[test]
fn remaining_length_longer_than_four_bytes() {
    assert_rejected(
        "30 FF FF FF FF 01",
        V3,
        E::MalformedRemainingLength,
        MALFORMED,
    );
}

#[test]
fn frame_beyond_the_buffer_is_incomplete_and_consumes_nothing() {
    let mut buf = hex("30 0A 00 03 61 2F 62");
    assert_eq!(decode(&mut buf, &Limits::new(V3)), Ok(None));
    assert_eq!(buf.len(), 7);
}

#[test]
fn packet_shorter_than_its_contents() {
    let wire = frame(0x32, "00 03 61 2F");
    let error = E::UnexpectedEnd {
        field: "topic name",
    };
    assert_rejected(&wire, V3, error, MALFORMED);
    let short_id = frame(0x40, "00");
    let error = E::UnexpectedEnd {
        field: "packet identifier",
    };
    assert_rejected(&short_id, V3, error, MALFORMED);
}

#[test]
fn packet_longer_than_its_contents() {
    let error = E::TrailingBytes {
        packet: PacketType::PubAck,
        extra: 1,
    };
    assert_rejected("40 03 00 0A 00", V3, error, MALFORMED);
    let error = E::TrailingBytes {
        packet: PacketType::PingReq,
        extra: 1,
    };
    assert_rejected("C0 01 00", V5, error, MALFORMED);
    let error = E::TrailingBytes {
        packet: PacketType::Connect,
        extra: 1,
    };
    let connect = frame(0x10, "00 04 4D 51 54 54 04 02 00 3C 00 01 63 FF");
    assert_rejected(&connect, V3, error, MALFORMED);
}

#[test]
fn reserved_fixed_header_flags() {
    let cases = [
        ("41 02 00 0A", PacketType::PubAck, 1),
        ("60 02 00 0A", PacketType::PubRel, 0),
        ("80 06 00 01 00 01 61 00", PacketType::Subscribe, 0),
        ("A0 05 00 01 00 01 61", PacketType::Unsubscribe, 0),
        ("C8 00", PacketType::PingReq, 8),
        ("E1 00", PacketType::Disconnect, 1),
    ];
    for (wire, packet, flags) in cases {
        let error = E::InvalidFixedHeaderFlags { packet, flags };
        assert_rejected(wire, V3, error, MALFORMED);
    }
}

#[test]
fn reserved_packet_types() {
    let error = E::ReservedPacketType {
        value: 0,
        protocol: V5,
    };
    assert_rejected("00 00", V5, error, MALFORMED);
    let error = E::ReservedPacketType {
        value: 15,
        protocol: V3,
    };
    assert_rejected("F0 00", V3, error, MALFORMED);
}

#[test]
fn publish_qos_3() {
    let error = E::InvalidQoS {
        field: "PUBLISH fixed header",
    };
    assert_rejected(&frame(0x36, "00 01 74 00 01"), V3, error, MALFORMED);
}

#[test]
fn publish_dup_with_qos_0() {
    assert_rejected(&frame(0x38, "00 01 74"), V3, E::DupWithQoS0, MALFORMED);
}

#[test]
fn packet_identifier_zero() {
    let cases = [
        (frame(0x32, "00 01 74 00 00"), PacketType::Publish),
        ("40 02 00 00".to_owned(), PacketType::PubAck),
        ("62 02 00 00".to_owned(), PacketType::PubRel),
        (frame(0x82, "00 00 00 01 61 00"), PacketType::Subscribe),
        (frame(0xA2, "00 00 00 01 61"), PacketType::Unsubscribe),
    ];
    for (wire, packet) in cases {
        assert_rejected(&wire, V3, E::ZeroPacketId { packet }, PROTOCOL_ERROR);
    }
}

#[test]
fn strings_that_are_not_well_formed_utf8() {
    let field = "topic name";
    assert_rejected(
        &frame(0x30, "00 02 61 FF"),
        V3,
        E::InvalidUtf8 { field },
        MALFORMED,
    );
    // A UTF-16 surrogate (U+D800) encoded as UTF-8 is ill-formed.
    let surrogate = frame(0x30, "00 03 ED A0 80");
    assert_rejected(&surrogate, V3, E::InvalidUtf8 { field }, MALFORMED);
    let field = "client identifier";
    let connect = frame(0x10, "00 04 4D 51 54 54 04 02 00 3C 00 01 C0");
    assert_rejected(&connect, V3, E::InvalidUtf8 { field }, MALFORMED);
}

#[test]
fn strings_holding_u0000() {
    let field = "topic name";
    assert_rejected(
        &frame(0x30, "00 02 61 00"),
        V3,
        E::NullCharacter { field },
        MALFORMED,
    );
    let field = "topic filter";
    let subscribe = frame(0x82, "00 01 00 02 61 00 00");
    assert_rejected(&subscribe, V3, E::NullCharacter { field }, MALFORMED);
}

#[test]
fn wildcards_in_publish_topic_names() {
    let field = "topic name";
    for topic in ["00 03 61 2F 2B", "00 01 23", "00 03 61 2F 23"] {
        let wire = frame(0x30, topic);
        assert_rejected(&wire, V3, E::WildcardInTopicName { field }, 0x90);
    }
    let wire = publish_v5("08 00 01 2B");
    let field = "response topic";
    assert_rejected(&wire, V5, E::WildcardInTopicName { field }, 0x90);
}

#[test]
fn empty_topic_name() {
    let field = "topic name";
    assert_rejected(
        &frame(0x30, "00 00 78"),
        V3,
        E::EmptyTopicName { field },
        PROTOCOL_ERROR,
    );
    let no_alias = frame(0x30, "00 00 00 78");
    assert_rejected(&no_alias, V5, E::EmptyTopicName { field }, PROTOCOL_ERROR);
}

#[test]
fn duplicate_properties() {
    let twice = publish_v5("02 00 00 00 01 02 00 00 00 02");
    let id = PropertyId::MessageExpiryInterval;
    assert_rejected(&twice, V5, E::DuplicateProperty { id }, PROTOCOL_ERROR);
    let ids_in_subscribe = frame(0x82, &format!("00 01 {} 00 01 61 00", props("0B 01 0B 02")));
    let id = PropertyId::SubscriptionIdentifier;
    assert_rejected(
        &ids_in_subscribe,
        V5,
        E::DuplicateProperty { id },
        PROTOCOL_ERROR,
    );
}

#[test]
fn repeatable_properties_are_not_duplicates() {
    let users = publish_v5("26 00 01 6B 00 01 76 26 00 01 6B 00 01 77 0B 01 0B 02");
    let Ok(Packet::Publish(publish)) = decode_one(&hex(&users), V5) else {
        panic!("user properties and subscription identifiers may repeat in PUBLISH");
    };
    assert_eq!(publish.properties.user_properties.len(), 2);
    assert_eq!(publish.properties.subscription_identifiers.len(), 2);
}

#[test]
fn property_not_allowed_in_the_packet() {
    let session_expiry = publish_v5("11 00 00 00 01");
    let error = E::PropertyNotAllowed {
        id: PropertyId::SessionExpiryInterval,
        context: "PUBLISH",
    };
    assert_rejected(&session_expiry, V5, error, MALFORMED);
    let alias_in_will = connect_v5(0x06, "", "00 01 63 03 23 00 01 00 01 77 00 00");
    let error = E::PropertyNotAllowed {
        id: PropertyId::TopicAlias,
        context: "will",
    };
    assert_rejected(&alias_in_will, V5, error, MALFORMED);
    let reason_in_connect = connect_v5(0x02, "1F 00 01 78", "00 01 63");
    let error = E::PropertyNotAllowed {
        id: PropertyId::ReasonString,
        context: "CONNECT",
    };
    assert_rejected(&reason_in_connect, V5, error, MALFORMED);
}

#[test]
fn unknown_property_identifier() {
    assert_rejected(
        &publish_v5("05 00"),
        V5,
        E::UnknownProperty { id: 5 },
        MALFORMED,
    );
}

#[test]
fn subscribe_without_filters() {
    let packet = PacketType::Subscribe;
    assert_rejected(
        "82 02 00 01",
        V3,
        E::NoTopicFilters { packet },
        PROTOCOL_ERROR,
    );
    assert_rejected(
        "82 03 00 01 00",
        V5,
        E::NoTopicFilters { packet },
        PROTOCOL_ERROR,
    );
}

#[test]
fn unsubscribe_without_filters() {
    let packet = PacketType::Unsubscribe;
    assert_rejected(
        "A2 02 00 01",
        V3,
        E::NoTopicFilters { packet },
        PROTOCOL_ERROR,
    );
    assert_rejected(
        "A2 03 00 01 00",
        V5,
        E::NoTopicFilters { packet },
        PROTOCOL_ERROR,
    );
}

#[test]
fn empty_topic_filter() {
    let packet = PacketType::Subscribe;
    let subscribe = frame(0x82, "00 01 00 00 00");
    assert_rejected(
        &subscribe,
        V3,
        E::EmptyTopicFilter { packet },
        PROTOCOL_ERROR,
    );
    let packet = PacketType::Unsubscribe;
    let unsubscribe = frame(0xA2, "00 01 00 00");
    assert_rejected(
        &unsubscribe,
        V3,
        E::EmptyTopicFilter { packet },
        PROTOCOL_ERROR,
    );
}

#[test]
fn invalid_subscription_options() {
    let subscribe = |protocol_props: &str, options: u8| {
        frame(
            0x82,
            &format!("00 01 {protocol_props} 00 01 61 {options:02X}"),
        )
    };
    for options in [0x40u8, 0x80, 0x03] {
        let error = E::InvalidSubscriptionOptions { options };
        assert_rejected(&subscribe("00", options), V5, error, MALFORMED);
    }
    let retain_handling_3 = subscribe("00", 0x30);
    assert_rejected(
        &retain_handling_3,
        V5,
        E::InvalidRetainHandling,
        PROTOCOL_ERROR,
    );
    for options in [0x04u8, 0x03, 0x10] {
        let error = E::InvalidSubscriptionOptions { options };
        assert_rejected(&subscribe("", options), V3, error, MALFORMED);
    }
}

#[test]
fn protocol_name_and_level_mismatch() {
    let connect = |name_level: &str| frame(0x10, &format!("{name_level} 02 00 3C 00 01 63"));
    let unsupported = 0x84;
    let mqtt_level_3 = connect("00 04 4D 51 54 54 03");
    let error = E::ProtocolNameLevelMismatch { level: 3 };
    assert_rejected(&mqtt_level_3, V3, error, unsupported);
    let mqisdp_level_4 = connect("00 06 4D 51 49 73 64 70 04");
    let error = E::ProtocolNameLevelMismatch { level: 4 };
    assert_rejected(&mqisdp_level_4, V3, error, unsupported);
    let level_6 = connect("00 04 4D 51 54 54 06");
    let error = E::UnsupportedProtocolLevel { level: 6 };
    assert_rejected(&level_6, V3, error, unsupported);
    let other_name = connect("00 04 4D 51 54 58 04");
    assert_rejected(&other_name, V3, E::UnsupportedProtocolName, unsupported);
}

#[test]
fn connect_flags_the_specification_forbids() {
    let connect = |flags: u8| {
        frame(
            0x10,
            &format!("00 04 4D 51 54 54 04 {flags:02X} 00 3C 00 01 63"),
        )
    };
    assert_rejected(&connect(0x03), V3, E::ConnectReservedFlag, MALFORMED);
    for flags in [0x0Au8, 0x22] {
        let error = E::WillFlagsWithoutWill { flags };
        assert_rejected(&connect(flags), V3, error, MALFORMED);
    }
    let error = E::InvalidQoS { field: "will QoS" };
    assert_rejected(&connect(0x1E), V3, error, MALFORMED);
    let error = E::PasswordWithoutUsername { protocol: V3 };
    assert_rejected(&connect(0x42), V3, error, MALFORMED);
}

#[test]
fn client_identifier_not_valid() {
    let empty_without_clean = frame(0x10, "00 04 4D 51 54 54 04 00 00 3C 00 00");
    let error = E::ClientIdRejected {
        protocol: V3,
        clean_start: false,
    };
    assert_rejected(&empty_without_clean, V3, error, 0x85);
    let v31 = ProtocolVersion::V3_1;
    let empty_on_3_1 = frame(0x10, "00 06 4D 51 49 73 64 70 03 02 00 3C 00 00");
    let error = E::ClientIdRejected {
        protocol: v31,
        clean_start: true,
    };
    assert_rejected(&empty_on_3_1, V3, error, 0x85);
}

#[test]
fn will_topic_rules() {
    let wildcard = frame(
        0x10,
        "00 04 4D 51 54 54 04 06 00 3C 00 01 63 00 01 23 00 00",
    );
    let field = "will topic";
    assert_rejected(&wildcard, V3, E::WildcardInTopicName { field }, 0x90);
    let empty = frame(0x10, "00 04 4D 51 54 54 04 06 00 3C 00 01 63 00 00 00 00");
    assert_rejected(&empty, V3, E::EmptyTopicName { field }, PROTOCOL_ERROR);
}

#[test]
fn payload_format_utf8_with_a_binary_payload() {
    let wire = frame(0x30, &format!("00 01 74 {} FF FE", props("01 01")));
    let Ok(Packet::Publish(publish)) = decode_one(&hex(&wire), V5) else {
        panic!("the format check is not part of decoding");
    };
    let error = publish
        .check_payload_format()
        .expect_err("0xFF is not UTF-8");
    assert_eq!(error, E::PayloadFormatInvalid { field: "payload" });
    assert_eq!(error.reason_code().as_u8(), 0x99);
    let text = codec::Publish {
        payload: Bytes::from_static("h\u{e9}".as_bytes()),
        ..publish
    };
    assert_eq!(text.check_payload_format(), Ok(()));
}

#[test]
fn will_payload_format_check() {
    let wire = connect_v5(0x06, "", "00 01 63 02 01 01 00 01 77 00 01 FF");
    let Ok(Packet::Connect(connect)) = decode_one(&hex(&wire), V5) else {
        panic!("valid CONNECT");
    };
    let will = connect.will.expect("will flag set");
    let error = will.check_payload_format().expect_err("0xFF is not UTF-8");
    assert_eq!(error.reason_code().as_u8(), 0x99);
}

#[test]
fn property_values_out_of_range() {
    let id = PropertyId::SubscriptionIdentifier;
    let zero_id = publish_v5("0B 00");
    assert_rejected(
        &zero_id,
        V5,
        E::InvalidPropertyValue { id, value: 0 },
        PROTOCOL_ERROR,
    );
    let id = PropertyId::ReceiveMaximum;
    let zero_receive = connect_v5(0x02, "21 00 00", "00 01 63");
    let error = E::InvalidPropertyValue { id, value: 0 };
    assert_rejected(&zero_receive, V5, error, PROTOCOL_ERROR);
    let id = PropertyId::MaximumPacketSize;
    let zero_size = connect_v5(0x02, "27 00 00 00 00", "00 01 63");
    let error = E::InvalidPropertyValue { id, value: 0 };
    assert_rejected(&zero_size, V5, error, PROTOCOL_ERROR);
    let id = PropertyId::RequestProblemInformation;
    let two = connect_v5(0x02, "17 02", "00 01 63");
    assert_rejected(
        &two,
        V5,
        E::InvalidPropertyValue { id, value: 2 },
        PROTOCOL_ERROR,
    );
    let id = PropertyId::PayloadFormatIndicator;
    let format_2 = publish_v5("01 02");
    let error = E::InvalidPropertyValue { id, value: 2 };
    assert_rejected(&format_2, V5, error, PROTOCOL_ERROR);
}

#[test]
fn topic_alias_zero() {
    assert_rejected(&publish_v5("23 00 00"), V5, E::TopicAliasZero, 0x94);
}

#[test]
fn variable_byte_integer_too_long() {
    let field = "property length";
    let wire = frame(0x30, "00 01 74 FF FF FF FF 7F");
    assert_rejected(
        &wire,
        V5,
        E::MalformedVariableByteInteger { field },
        MALFORMED,
    );
    let field = "subscription identifier";
    let wire = publish_v5("0B FF FF FF FF 7F");
    assert_rejected(
        &wire,
        V5,
        E::MalformedVariableByteInteger { field },
        MALFORMED,
    );
}

#[test]
fn packet_too_large_is_detected_from_the_fixed_header_alone() {
    let limits = Limits::new(V3).with_max_packet_size(10);
    let mut header_only = hex("30 09");
    let error = E::PacketTooLarge { size: 11, max: 10 };
    assert_eq!(decode(&mut header_only, &limits), Err(error.clone()));
    assert_eq!(error.reason_code().as_u8(), 0x95);
    let mut exactly = hex(&frame(0x30, "00 01 74 01 02 03 04 05"));
    assert!(matches!(
        decode(&mut exactly, &limits),
        Ok(Some(Packet::Publish(_)))
    ));
}

#[test]
fn reason_codes_unknown_or_not_allowed() {
    let packet = PacketType::PubAck;
    let unknown = E::UnknownReasonCode { packet, value: 5 };
    assert_rejected("40 03 00 01 05", V5, unknown, MALFORMED);
    let code = codec::ReasonCode::TopicFilterInvalid;
    let not_allowed = E::ReasonCodeNotAllowed { packet, code };
    assert_rejected("40 03 00 01 8F", V5, not_allowed, PROTOCOL_ERROR);
    let packet = PacketType::ConnAck;
    assert_rejected(
        "20 02 00 06",
        V3,
        E::UnknownReasonCode { packet, value: 6 },
        MALFORMED,
    );
    let packet = PacketType::SubAck;
    assert_rejected(
        "90 03 00 01 83",
        V3,
        E::UnknownReasonCode {
            packet,
            value: 0x83,
        },
        MALFORMED,
    );
}

#[test]
fn acknowledgements_without_reason_codes() {
    let packet = PacketType::SubAck;
    assert_rejected(
        "90 02 00 01",
        V3,
        E::NoReasonCodes { packet },
        PROTOCOL_ERROR,
    );
    let packet = PacketType::UnsubAck;
    assert_rejected(
        "B0 03 00 01 00",
        V5,
        E::NoReasonCodes { packet },
        PROTOCOL_ERROR,
    );
}

#[test]
fn connack_reserved_flags() {
    assert_rejected(
        "20 02 02 00",
        V3,
        E::InvalidConnAckFlags { flags: 2 },
        MALFORMED,
    );
}

#[test]
fn authentication_data_without_method() {
    let wire = connect_v5(0x02, "16 00 01 AB", "00 01 63");
    let error = E::AuthDataWithoutMethod { context: "CONNECT" };
    assert_rejected(&wire, V5, error, PROTOCOL_ERROR);
}

#[test]
fn property_block_longer_than_the_packet() {
    let wire = frame(0x30, "00 01 74 05 01 01");
    let error = E::UnexpectedEnd {
        field: "properties",
    };
    assert_rejected(&wire, V5, error, MALFORMED);
}

#[test]
fn errors_in_the_fixed_header_consume_nothing() {
    let mut buf = BytesMut::from(&hex("41 02 00 0A")[..]);
    assert!(decode(&mut buf, &Limits::new(V3)).is_err());
    assert_eq!(buf.len(), 4);
}
