//! One test per malformed-input rule of properties, subscription options and CONNECT: each
//! asserts the exact error and its reason code.

mod common;

use bytes::Bytes;
use codec::{DecodeError as E, Packet, PropertyId, ProtocolVersion};
use common::{
    MALFORMED, PROTOCOL_ERROR, V3, V5, assert_rejected, connect_v5, decode_one, frame, hex, props,
    publish_v5,
};

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
    assert_eq!(publish.properties.application.user_properties().count(), 2);
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

/// A property identifier is a Variable Byte Integer: the one-byte fast path hands every
/// longer form to the full reader, which refuses a non-minimal one and reads a long one whole.
#[test]
fn property_identifiers_of_more_than_one_byte() {
    let field = "property identifier";
    for non_minimal in ["81 00", "A6 00", "80 80 00"] {
        assert_rejected(
            &publish_v5(non_minimal),
            V5,
            E::MalformedVariableByteInteger { field },
            MALFORMED,
        );
    }
    let long = E::UnknownProperty { id: 128 };
    assert_rejected(&publish_v5("80 01 00"), V5, long, MALFORMED);
    let cut = E::UnexpectedEnd { field };
    assert_rejected(&publish_v5("80"), V5, cut, MALFORMED);
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
    let mut text = publish;
    text.content
        .set_payload(Bytes::from_static("h\u{e9}".as_bytes()));
    assert_eq!(text.check_payload_format(), Ok(()));
}

#[test]
fn will_payload_format_check() {
    let wire = connect_v5(0x06, "", "00 01 63 02 01 01 00 01 77 00 01 FF");
    let Ok(Packet::ConnectFrame(connect)) = decode_one(&hex(&wire), V5) else {
        panic!("valid CONNECT");
    };
    let will = connect.to_connect().will.expect("will flag set");
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
fn authentication_data_without_method() {
    let wire = connect_v5(0x02, "16 00 01 AB", "00 01 63");
    let error = E::AuthDataWithoutMethod { context: "CONNECT" };
    assert_rejected(&wire, V5, error, PROTOCOL_ERROR);
}
