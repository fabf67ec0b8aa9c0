//! `MqttStr`: an MQTT UTF-8 Encoded String backed by `Bytes`, validated once, never copied.

use std::fmt;

use bytes::Bytes;

use crate::DecodeError;

/// A UTF-8 Encoded String of MQTT (section 1.5.4): well-formed UTF-8 without U+0000, at most
/// 65,535 bytes. It shares the buffer it was decoded from (cloning it is a reference-count
/// increment).
///
/// Control characters (U+0001..U+001F, U+007F..U+009F) and non-characters are accepted: the
/// specification lets a receiver reject them but does not require it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct MqttStr(Bytes);

impl MqttStr {
    /// The longest string MQTT can carry: its length prefix is two bytes.
    pub const MAX_LEN: usize = u16::MAX as usize;

    /// Validates `bytes` and wraps them without copying.
    pub fn from_bytes(bytes: Bytes) -> Result<Self, DecodeError> {
        validate(&bytes, "string")?;
        Ok(Self(bytes))
    }

    /// Wraps a static string without copying.
    pub fn from_static(text: &'static str) -> Result<Self, DecodeError> {
        Self::from_bytes(Bytes::from_static(text.as_bytes()))
    }

    /// Wraps `bytes` that `validate` accepted for `field`.
    #[inline]
    pub(crate) fn from_validated(bytes: Bytes) -> Self {
        Self(bytes)
    }

    /// A copy in an allocation of its own (no longer sharing the buffer it was decoded from),
    /// without validating again: the bytes are the same.
    pub fn detached(&self) -> Self {
        Self(Bytes::copy_from_slice(&self.0))
    }

    /// The text. This re-checks UTF-8 (a fast scan; the crate forbids `unsafe`, so the
    /// unchecked conversion is not available). Use [`Self::as_bytes`] where bytes suffice.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("invariant: MqttStr holds validated UTF-8")
    }

    /// The UTF-8 bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The shared buffer behind this string.
    pub fn as_shared_bytes(&self) -> &Bytes {
        &self.0
    }

    /// The shared buffer behind this string.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the string is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the string holds a topic wildcard (`+` or `#`), which a topic name must not.
    #[inline]
    pub fn has_wildcard(&self) -> bool {
        has_wildcard(&self.0)
    }
}

/// What one scan of a string found.
#[derive(Clone, Copy)]
struct Scan {
    null: bool,
    wildcard: bool,
    non_ascii: bool,
}

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
/// `+` (0x2B) and `#` (0x23) differ only in bit 3, and no other byte becomes 0x2B when bit 3
/// is set: `byte | 0x08 == b'+'` finds both wildcards with one comparison.
const WILDCARD_FOLD: u64 = u64::from_ne_bytes([0x08; 8]);
const PLUS: u64 = u64::from_ne_bytes([b'+'; 8]);
/// Fills the unused bytes of a short final word: not zero, not a wildcard, ASCII.
const FILLER: u8 = b'a';

/// Nonzero exactly when some byte of `word` is zero: the classic SWAR test before its final
/// mask with [`HIGHS`]. Borrows can set high bits above a zero byte but never without one, so
/// ORing results over several words and masking once at the end stays exact.
#[inline(always)]
const fn zero_byte_bits(word: u64) -> u64 {
    word.wrapping_sub(ONES) & !word
}

/// [`zero_byte_bits`] of the bytes of `word` that are `+` or `#`.
#[inline(always)]
const fn wildcard_bits(word: u64) -> u64 {
    zero_byte_bits((word | WILDCARD_FOLD) ^ PLUS)
}

/// `bytes` as eight-byte words: every full word, then the last eight bytes again (they
/// overlap the previous word, which is harmless for a scan that only ORs what it finds) or,
/// for fewer than eight bytes, [`short_word`].
#[inline(always)]
fn for_each_word(bytes: &[u8], mut visit: impl FnMut(u64)) {
    let len = bytes.len();
    if len < 8 {
        visit(short_word(bytes));
        return;
    }
    let word_at = |at: usize| {
        let word: [u8; 8] = bytes[at..at + 8].try_into().expect("invariant: 8 bytes");
        u64::from_ne_bytes(word)
    };
    let mut at = 0;
    while at + 8 <= len {
        visit(word_at(at));
        at += 8;
    }
    if at < len {
        visit(word_at(len - 8));
    }
}

/// The bytes of a string shorter than eight as one word, without a copy through memory: two
/// overlapping reads cover every byte (a byte seen twice is harmless for a scan that only ORs
/// what it finds) and [`FILLER`] fills the lanes left over.
#[inline(always)]
fn short_word(bytes: &[u8]) -> u64 {
    const FILLERS: u64 = u64::from_ne_bytes([FILLER; 8]);
    let len = bytes.len();
    debug_assert!(len < 8);
    let two = |at: usize| u64::from(u16::from_ne_bytes([bytes[at], bytes[at + 1]]));
    match len {
        0 => FILLERS,
        1 => FILLERS & !0xFF | u64::from(bytes[0]),
        2 | 3 => FILLERS & !0xFFFF_FFFF | two(0) | two(len - 2) << 16,
        _ => {
            let four = |at: usize| {
                let word: [u8; 4] = bytes[at..at + 4].try_into().expect("invariant: 4 bytes");
                u64::from(u32::from_ne_bytes(word))
            };
            four(0) | four(len - 4) << 32
        }
    }
}

/// Scans `bytes` eight at a time for U+0000, `+`, `#` and non-ASCII bytes.
#[inline]
fn scan(bytes: &[u8]) -> Scan {
    let (mut found, mut nulls, mut wildcards) = (0u64, 0u64, 0u64);
    for_each_word(bytes, |word| {
        found |= word;
        nulls |= zero_byte_bits(word);
        wildcards |= wildcard_bits(word);
    });
    Scan {
        null: nulls & HIGHS != 0,
        wildcard: wildcards & HIGHS != 0,
        non_ascii: found & HIGHS != 0,
    }
}

/// Whether `bytes` hold `+` or `#` (the encoder's check; cheaper than a full [`scan`]).
#[inline]
pub(crate) fn has_wildcard(bytes: &[u8]) -> bool {
    let mut wildcards = 0u64;
    for_each_word(bytes, |word| wildcards |= wildcard_bits(word));
    wildcards & HIGHS != 0
}

fn check_scan(bytes: &[u8], scan: Scan, field: &'static str) -> Result<(), DecodeError> {
    if bytes.len() > MqttStr::MAX_LEN {
        return Err(DecodeError::StringTooLong { len: bytes.len() });
    }
    if scan.non_ascii && std::str::from_utf8(bytes).is_err() {
        return Err(DecodeError::InvalidUtf8 { field });
    }
    if scan.null {
        return Err(DecodeError::NullCharacter { field });
    }
    Ok(())
}

/// Checks that `bytes` form an MQTT UTF-8 Encoded String; `field` names it in the error.
#[inline]
pub(crate) fn validate(bytes: &[u8], field: &'static str) -> Result<(), DecodeError> {
    check_scan(bytes, scan(bytes), field)
}

/// Checks a topic name (PUBLISH, Will, Response Topic): UTF-8 rules plus no wildcard. An empty
/// name passes here; whether it is allowed depends on the packet.
#[inline]
pub(crate) fn validate_topic_name(bytes: &[u8], field: &'static str) -> Result<(), DecodeError> {
    let scan = scan(bytes);
    if scan.wildcard {
        return Err(DecodeError::WildcardInTopicName { field });
    }
    check_scan(bytes, scan, field)
}

impl TryFrom<&str> for MqttStr {
    type Error = DecodeError;

    /// Copies `text` into a new buffer.
    fn try_from(text: &str) -> Result<Self, Self::Error> {
        Self::from_bytes(Bytes::copy_from_slice(text.as_bytes()))
    }
}

impl TryFrom<String> for MqttStr {
    type Error = DecodeError;

    /// Takes over the allocation of `text` without copying.
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::from_bytes(Bytes::from(text))
    }
}

impl TryFrom<Bytes> for MqttStr {
    type Error = DecodeError;

    fn try_from(bytes: Bytes) -> Result<Self, Self::Error> {
        Self::from_bytes(bytes)
    }
}

impl PartialEq<str> for MqttStr {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for MqttStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl fmt::Debug for MqttStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for MqttStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detached_copy_is_equal_and_shares_nothing() {
        let buffer = Bytes::from_static(b"xa/b/\xc3\xa9y");
        let text = MqttStr::from_bytes(buffer.slice(1..7)).unwrap();
        let copy = text.detached();
        assert_eq!(copy, text);
        assert_eq!(copy.as_str(), "a/b/\u{e9}");
        assert_ne!(copy.as_bytes().as_ptr(), text.as_bytes().as_ptr());
    }

    #[test]
    fn accepts_the_specification_example() {
        // Figure 1-1 of MQTT 5.0: "A" followed by U+2A6D4.
        let s = MqttStr::from_bytes(Bytes::from_static(&[0x41, 0xF0, 0xAA, 0x9B, 0x94]))
            .expect("valid");
        assert_eq!(s.as_str(), "A\u{2A6D4}");
        assert_eq!(s.len(), 5);
    }

    #[test]
    fn rejects_null_surrogates_and_overlong_forms() {
        let null = MqttStr::from_static("a\0b");
        assert_eq!(null, Err(DecodeError::NullCharacter { field: "string" }));
        for bad in [&[0xED, 0xA0, 0x80][..], &[0xC0, 0x80], &[0xFF]] {
            let err = MqttStr::from_bytes(Bytes::copy_from_slice(bad));
            assert_eq!(err, Err(DecodeError::InvalidUtf8 { field: "string" }));
        }
    }

    #[test]
    fn rejects_more_than_65535_bytes() {
        let long = "x".repeat(MqttStr::MAX_LEN + 1);
        assert_eq!(
            MqttStr::try_from(long),
            Err(DecodeError::StringTooLong { len: 65_536 })
        );
        assert!(MqttStr::try_from("x".repeat(MqttStr::MAX_LEN)).is_ok());
    }

    #[test]
    fn the_word_scan_agrees_with_a_byte_scan() {
        let samples: [&[u8]; 6] = [
            b"sensors/building-7/floor-3/temperature",
            b"abcdefg+",
            b"abcdefgh#",
            b"abcdefgh\0",
            "caf\u{e9}/\u{4e2d}".as_bytes(),
            b"",
        ];
        for sample in samples {
            for start in 0..sample.len().max(1) {
                let bytes = &sample[start.min(sample.len())..];
                let found = scan(bytes);
                assert_eq!(found.null, bytes.contains(&0), "{bytes:?}");
                let wildcard = bytes.iter().any(|&b| b == b'+' || b == b'#');
                assert_eq!(found.wildcard, wildcard, "{bytes:?}");
                assert_eq!(has_wildcard(bytes), wildcard, "{bytes:?}");
                assert_eq!(found.non_ascii, !bytes.is_ascii(), "{bytes:?}");
            }
        }
    }

    #[test]
    fn every_byte_value_is_classified_at_every_position() {
        for len in 1..=17 {
            for at in 0..len {
                for byte in 0..=u8::MAX {
                    let mut bytes = vec![b'x'; len];
                    bytes[at] = byte;
                    let found = scan(&bytes);
                    let wildcard = byte == b'+' || byte == b'#';
                    assert_eq!(found.null, byte == 0, "{bytes:?}");
                    assert_eq!(found.wildcard, wildcard, "{bytes:?}");
                    assert_eq!(has_wildcard(&bytes), wildcard, "{bytes:?}");
                    assert_eq!(found.non_ascii, !byte.is_ascii(), "{bytes:?}");
                }
            }
        }
    }

    #[test]
    fn topic_names_refuse_wildcards() {
        assert!(validate_topic_name(b"a/b", "topic").is_ok());
        assert_eq!(
            validate_topic_name(b"a/+", "topic"),
            Err(DecodeError::WildcardInTopicName { field: "topic" })
        );
        assert!(MqttStr::from_static("a/#").expect("valid").has_wildcard());
    }
}
