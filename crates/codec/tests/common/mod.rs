//! Helpers shared by the codec's integration tests.
#![allow(dead_code)]

use bytes::BytesMut;
use codec::{DecodeError, Limits, MqttStr, Packet, PacketId, ProtocolVersion, decode, encode};

/// MQTT 3.1.1.
pub const V3: ProtocolVersion = ProtocolVersion::V3_1_1;
/// MQTT 5.0.
pub const V5: ProtocolVersion = ProtocolVersion::V5;
/// Reason code Malformed Packet.
pub const MALFORMED: u8 = 0x81;
/// Reason code Protocol Error.
pub const PROTOCOL_ERROR: u8 = 0x82;

/// Bytes from a hex string; whitespace is ignored.
pub fn hex(text: &str) -> BytesMut {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(
        digits.len().is_multiple_of(2),
        "odd number of hex digits in {text:?}"
    );
    let value = |d: u8| (d as char).to_digit(16).expect("hex digit") as u8;
    digits
        .chunks(2)
        .map(|pair| value(pair[0]) << 4 | value(pair[1]))
        .collect::<Vec<u8>>()
        .as_slice()
        .into()
}

/// A string known to be valid.
pub fn s(text: &'static str) -> MqttStr {
    MqttStr::from_static(text).expect("valid test string")
}

/// A non-zero packet identifier.
pub fn pid(value: u16) -> PacketId {
    PacketId::new(value).expect("non-zero test packet id")
}

/// Decodes exactly one packet from `bytes`, asserting the whole input was consumed.
pub fn decode_one(bytes: &[u8], protocol: ProtocolVersion) -> Result<Packet, DecodeError> {
    let mut buf = BytesMut::from(bytes);
    let packet = decode(&mut buf, &Limits::new(protocol))?;
    let packet = packet.expect("a complete frame decodes to a packet");
    assert!(buf.is_empty(), "{} bytes left after one packet", buf.len());
    Ok(packet)
}

/// Encodes one packet.
pub fn encode_one(packet: &Packet, protocol: ProtocolVersion) -> BytesMut {
    let mut buf = BytesMut::new();
    encode(packet, protocol, &mut buf).expect("encodable test packet");
    buf
}

/// Asserts that `wire` decodes to `packet` and `packet` encodes to `wire`.
pub fn assert_golden(wire: &str, protocol: ProtocolVersion, packet: Packet) {
    let bytes = hex(wire);
    let decoded = decode_one(&bytes, protocol).expect("golden fixture decodes");
    assert_eq!(decoded, packet, "decoding {wire}");
    let encoded = encode_one(&packet, protocol);
    assert_eq!(encoded, bytes, "encoding {packet:?}");
    let len = codec::encoded_len(&packet, protocol).expect("measurable");
    assert_eq!(len, bytes.len());
}

/// Asserts that `wire` fails to decode with `error`, whose reason code is `reason`.
pub fn assert_rejected(wire: &str, protocol: ProtocolVersion, error: DecodeError, reason: u8) {
    let mut buf = hex(wire);
    let got = decode(&mut buf, &Limits::new(protocol));
    assert_eq!(got, Err(error.clone()), "decoding {wire}");
    assert_eq!(
        error.reason_code().as_u8(),
        reason,
        "reason code of {error:?}"
    );
}

/// A frame: `first` byte, the remaining length computed from `body_hex`, then the body.
pub fn frame(first: u8, body_hex: &str) -> String {
    let body = hex(body_hex);
    let mut out = BytesMut::new();
    out.extend_from_slice(&[first]);
    let mut len = body.len();
    loop {
        let mut byte = (len % 128) as u8;
        len /= 128;
        if len > 0 {
            byte |= 0x80;
        }
        out.extend_from_slice(&[byte]);
        if len == 0 {
            break;
        }
    }
    out.extend_from_slice(&body);
    out.iter().map(|b| format!("{b:02X}")).collect()
}

/// A properties block: its length as one byte, then `props_hex`.
pub fn props(props_hex: &str) -> String {
    let len = hex(props_hex).len();
    assert!(len < 128, "test property blocks stay below 128 bytes");
    format!("{len:02X} {props_hex}")
}

/// A 5.0 CONNECT with `flags`, keep alive 60, the given properties and payload.
pub fn connect_v5(flags: u8, props_hex: &str, payload_hex: &str) -> String {
    let body = format!(
        "00 04 4D 51 54 54 05 {flags:02X} 00 3C {} {payload_hex}",
        props(props_hex)
    );
    frame(0x10, &body)
}

/// A 5.0 QoS 0 PUBLISH on topic "t" with the given properties and payload "x".
pub fn publish_v5(props_hex: &str) -> String {
    frame(0x30, &format!("00 01 74 {} 78", props(props_hex)))
}
