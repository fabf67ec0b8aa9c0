//! One test per malformed-input rule (framing, lengths, strings, topics, identifiers, lists,
//! reason codes): each asserts the exact error and its reason code. Properties and CONNECT
//! rules are in `malformed_fields.rs`.

mod common;

use bytes::BytesMut;
use codec::{DecodeError as E, Limits, Packet, PacketType, decode};
use common::{MALFORMED, PROTOCOL_ERROR, V3, V5, assert_rejected, frame, hex, publish_v5};

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
fn acknowledgements_back_to_back_are_each_consumed_whole() {
    // PUBACK 7, PUBREC 8, a 5.0 PUBACK 9 with a reason code (read the long way), then half of
    // a PUBCOMP, which waits for the rest.
    let mut buf = hex("40 02 00 07 50 02 00 08 40 03 00 09 10 70 02 00");
    let limits = Limits::new(V5);
    let mut next = || decode(&mut buf, &limits).expect("valid frames");
    let Some(Packet::PubAck(first)) = next() else {
        panic!("a PUBACK first");
    };
    assert_eq!(first.packet_id.get(), 7);
    assert!(matches!(next(), Some(Packet::PubRec(rec)) if rec.packet_id.get() == 8));
    let Some(Packet::PubAck(third)) = next() else {
        panic!("a PUBACK third");
    };
    assert_eq!(
        (third.packet_id.get(), third.reason_code.as_u8()),
        (9, 0x10)
    );
    assert_eq!(next(), None);
    assert_eq!(buf.len(), 3);
    buf.extend_from_slice(&[0x0A]);
    let Some(Packet::PubComp(comp)) = decode(&mut buf, &limits).expect("valid frame") else {
        panic!("a PUBCOMP once complete");
    };
    assert_eq!(comp.packet_id.get(), 10);
    assert!(buf.is_empty());
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

/// MQTT-1.5.5-1: a Variable Byte Integer uses the fewest bytes; `80 00` is a malformed 0.
#[test]
fn variable_byte_integer_not_minimal() {
    assert_rejected("C0 80 00", V3, E::MalformedRemainingLength, MALFORMED);
    assert_rejected("E0 80 00", V5, E::MalformedRemainingLength, MALFORMED);
    let field = "property length";
    let wire = frame(0x30, "00 01 74 80 00");
    assert_rejected(
        &wire,
        V5,
        E::MalformedVariableByteInteger { field },
        MALFORMED,
    );
    let field = "subscription identifier";
    let wire = publish_v5("0B 81 00");
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
