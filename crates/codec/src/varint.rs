//! Variable Byte Integers (MQTT 5.0 section 1.5.5): 1 to 4 bytes, 7 bits each, least
//! significant group first.

use bytes::BufMut;

/// The largest value a variable byte integer can carry.
pub const MAX_VARIABLE_BYTE_INTEGER: u32 = 268_435_455;

/// Outcome of reading a variable byte integer from the front of a slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Varint {
    /// The value and how many bytes encoded it.
    Complete { value: u32, len: usize },
    /// The slice ends before the last byte of the integer.
    Incomplete,
    /// Four bytes with the continuation bit set: more than 4 bytes is malformed.
    TooLong,
    /// More bytes than the value needs (such as `0x80 0x00`): malformed (MQTT-1.5.5-1).
    NonMinimal,
}

/// Reads a variable byte integer from the front of `bytes`. A non-minimal encoding (a last
/// byte of zero after a continuation) is refused: MQTT-1.5.5-1 requires the fewest bytes.
#[inline]
pub(crate) fn parse(bytes: &[u8]) -> Varint {
    let mut value: u32 = 0;
    for (index, &byte) in bytes.iter().take(4).enumerate() {
        value |= u32::from(byte & 0x7F) << (7 * index);
        if byte & 0x80 == 0 {
            if byte == 0 && index > 0 {
                return Varint::NonMinimal;
            }
            return Varint::Complete {
                value,
                len: index + 1,
            };
        }
    }
    if bytes.len() >= 4 {
        Varint::TooLong
    } else {
        Varint::Incomplete
    }
}

/// How many bytes `value` takes as a variable byte integer (`value` must be at most
/// [`MAX_VARIABLE_BYTE_INTEGER`]).
#[inline]
pub(crate) const fn encoded_len(value: u32) -> usize {
    match value {
        0..=127 => 1,
        128..=16_383 => 2,
        16_384..=2_097_151 => 3,
        _ => 4,
    }
}

/// Appends `value` (at most [`MAX_VARIABLE_BYTE_INTEGER`]) as a variable byte integer.
#[inline]
pub(crate) fn put(buf: &mut impl BufMut, mut value: u32) {
    loop {
        let mut byte = (value & 0x7F) as u8;
        value >>= 7;
        if value > 0 {
            byte |= 0x80;
        }
        buf.put_u8(byte);
        if value == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The boundaries table of MQTT 5.0 section 1.5.5.
    const TABLE: [(u32, &[u8]); 8] = [
        (0, &[0x00]),
        (127, &[0x7F]),
        (128, &[0x80, 0x01]),
        (16_383, &[0xFF, 0x7F]),
        (16_384, &[0x80, 0x80, 0x01]),
        (2_097_151, &[0xFF, 0xFF, 0x7F]),
        (2_097_152, &[0x80, 0x80, 0x80, 0x01]),
        (268_435_455, &[0xFF, 0xFF, 0xFF, 0x7F]),
    ];

    #[test]
    fn specification_boundaries_round_trip() {
        for (value, wire) in TABLE {
            let mut out = Vec::new();
            put(&mut out, value);
            assert_eq!(out, wire, "encoding {value}");
            assert_eq!(encoded_len(value), wire.len());
            let len = wire.len();
            assert_eq!(parse(wire), Varint::Complete { value, len });
        }
    }

    #[test]
    fn incomplete_and_too_long() {
        assert_eq!(parse(&[]), Varint::Incomplete);
        assert_eq!(parse(&[0x80, 0x80]), Varint::Incomplete);
        assert_eq!(parse(&[0xFF, 0xFF, 0xFF, 0xFF]), Varint::TooLong);
        assert_eq!(parse(&[0x80, 0x80, 0x80, 0x80, 0x01]), Varint::TooLong);
    }

    #[test]
    fn non_minimal_encoding_is_refused() {
        assert_eq!(parse(&[0x80, 0x00]), Varint::NonMinimal);
        assert_eq!(parse(&[0xFF, 0x80, 0x00]), Varint::NonMinimal);
        assert_eq!(parse(&[0x80, 0x80, 0x80, 0x00]), Varint::NonMinimal);
        assert_eq!(parse(&[0x81, 0x00]), Varint::NonMinimal);
    }
}
