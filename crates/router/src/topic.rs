//! Topic names (what a PUBLISH is sent to) and the rules and limits shared with topic filters.
//!
//! Topic names and filters keep their text as a [`ByteString`]: `Bytes` whose UTF-8 was
//! checked once, when the value was built, so reading it as `&str` costs nothing afterwards
//! (the check is the type's: this crate has no `unsafe`).

use bytes::Bytes;
use bytestring::ByteString;
use codec::MqttStr;

use crate::error::TopicError;

/// The protocol's own limit: a topic is a UTF-8 string with a two-byte length prefix.
pub const PROTOCOL_MAX_TOPIC_LENGTH: usize = 65_535;

/// Limits applied when a topic name or filter is parsed, on top of the protocol rules.
///
/// Every field is public; [`TopicLimits::default`] documents the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicLimits {
    /// Maximum length in bytes. Default 65,535 (the protocol maximum); a larger value is
    /// treated as 65,535.
    pub max_length: usize,
    /// Maximum number of `/`-separated levels. Default 128 (deep enough for any real hierarchy
    /// while bounding the work of one match).
    pub max_levels: usize,
}

impl Default for TopicLimits {
    fn default() -> Self {
        Self {
            max_length: PROTOCOL_MAX_TOPIC_LENGTH,
            max_levels: 128,
        }
    }
}

impl TopicLimits {
    /// The length limit in force: the configured one, capped at the protocol maximum.
    pub const fn effective_max_length(&self) -> usize {
        if self.max_length < PROTOCOL_MAX_TOPIC_LENGTH {
            self.max_length
        } else {
            PROTOCOL_MAX_TOPIC_LENGTH
        }
    }
}

/// Checks the rules every topic name and filter shares: non-empty, within the length and level
/// limits, UTF-8, no U+0000. Returns the input as text, its UTF-8 checked once here.
pub(crate) fn check_common(bytes: Bytes, limits: &TopicLimits) -> Result<ByteString, TopicError> {
    check_length(&bytes, limits)?;
    let text = ByteString::try_from(bytes).map_err(|e| TopicError::InvalidUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    if let Some(offset) = text.as_bytes().iter().position(|&b| b == 0) {
        return Err(TopicError::NullCharacter { offset });
    }
    check_levels(text.as_bytes(), limits)?;
    Ok(text)
}

/// Checks that `bytes` are not empty and within the length limit.
fn check_length(bytes: &[u8], limits: &TopicLimits) -> Result<(), TopicError> {
    if bytes.is_empty() {
        return Err(TopicError::Empty);
    }
    let max = limits.effective_max_length();
    if bytes.len() > max {
        return Err(TopicError::TooLong {
            len: bytes.len(),
            max,
        });
    }
    Ok(())
}

/// Checks that `bytes` have no more `/`-separated levels than the limit allows. Text shorter
/// than the limit needs no count: n bytes hold at most n + 1 levels.
fn check_levels(bytes: &[u8], limits: &TopicLimits) -> Result<(), TopicError> {
    if bytes.len() < limits.max_levels {
        return Ok(());
    }
    let levels = bytes.iter().filter(|&&b| b == b'/').count() + 1;
    if levels > limits.max_levels {
        return Err(TopicError::TooManyLevels {
            levels,
            max: limits.max_levels,
        });
    }
    Ok(())
}

/// Splits off the first level of `rest`: the level and what follows the `/` (`None` when this
/// was the last level). Empty levels are levels: `"a//b"` has three.
#[inline]
pub(crate) fn split_level(rest: &[u8]) -> (&[u8], Option<&[u8]>) {
    match rest.iter().position(|&b| b == b'/') {
        Some(slash) => (&rest[..slash], Some(&rest[slash + 1..])),
        None => (rest, None),
    }
}

/// The `/`-separated levels of a topic name or filter, without allocating.
#[derive(Debug, Clone)]
pub struct Levels<'a> {
    inner: std::str::Split<'a, char>,
}

impl<'a> Levels<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            inner: text.split('/'),
        }
    }
}

impl<'a> Iterator for Levels<'a> {
    type Item = &'a str;

    #[inline]
    fn next(&mut self) -> Option<&'a str> {
        self.inner.next()
    }
}

/// The accessors and trait impls shared by the topic newtypes backed by a [`ByteString`].
macro_rules! validated_topic_text {
    ($ty:ident) => {
        impl $ty {
            /// The text (no UTF-8 pass: it was checked when the value was built).
            #[inline]
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The raw bytes.
            #[inline]
            pub fn as_bytes(&self) -> &[u8] {
                self.0.as_bytes()
            }

            /// The backing buffer (a cheap, reference-counted clone).
            pub fn to_bytes(&self) -> bytes::Bytes {
                self.0.as_bytes().clone()
            }

            /// Length in bytes.
            #[inline]
            pub fn len(&self) -> usize {
                self.0.len()
            }

            /// Always false: validation rejects empty input. Present for API symmetry.
            #[inline]
            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }

            /// The `/`-separated levels, without allocating.
            pub fn levels(&self) -> $crate::topic::Levels<'_> {
                $crate::topic::Levels::new(self.as_str())
            }

            /// A copy in its own allocation, so that a long-lived value does not keep a larger
            /// buffer (such as a receive buffer it was sliced from) alive.
            pub fn detached(&self) -> Self {
                Self(bytestring::ByteString::from(self.as_str()))
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({:?})", stringify!($ty), self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::error::TopicError;

            /// Parses with [`TopicLimits::default`](crate::TopicLimits).
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                Self::new(text, &$crate::topic::TopicLimits::default())
            }
        }
    };
}

pub(crate) use validated_topic_text;

/// A validated topic name: non-empty, within limits, UTF-8 without U+0000, no `+` or `#`.
///
/// Backed by a [`ByteString`] (`Bytes` checked as UTF-8 once): cloning is a reference-count
/// increment, a name can borrow the codec's receive buffer without copying, and reading it as
/// text is free.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicName(ByteString);

impl TopicName {
    /// Validates `text` as a topic name (copies it).
    pub fn new(text: &str, limits: &TopicLimits) -> Result<Self, TopicError> {
        Self::from_bytes(Bytes::copy_from_slice(text.as_bytes()), limits)
    }

    /// Validates `bytes` as a topic name without copying them.
    pub fn from_bytes(bytes: Bytes, limits: &TopicLimits) -> Result<Self, TopicError> {
        let text = check_common(bytes, limits)?;
        check_no_wildcard(text.as_bytes())?;
        Ok(Self(text))
    }

    /// A topic name from a decoded string, which holds UTF-8 without U+0000 already (checked
    /// by the codec): the limits and the wildcard rule are checked here, and the text is taken
    /// over without copying.
    pub fn from_mqtt_str(text: MqttStr, limits: &TopicLimits) -> Result<Self, TopicError> {
        check_length(text.as_bytes(), limits)?;
        check_levels(text.as_bytes(), limits)?;
        if text.has_wildcard() {
            check_no_wildcard(text.as_bytes())?;
        }
        let text =
            ByteString::try_from(text.into_bytes()).map_err(|e| TopicError::InvalidUtf8 {
                valid_up_to: e.valid_up_to(),
            })?;
        Ok(Self(text))
    }

    /// Whether the first level starts with `$` (such topics are not matched by a filter whose
    /// first level is a wildcard, MQTT 4.7.2).
    #[inline]
    pub fn is_dollar(&self) -> bool {
        self.0.as_bytes().first() == Some(&b'$')
    }
}

validated_topic_text!(TopicName);

/// Refuses a topic name with a `+` or `#` in it (MQTT 4.7.1).
fn check_no_wildcard(bytes: &[u8]) -> Result<(), TopicError> {
    match bytes.iter().position(|&b| b == b'+' || b == b'#') {
        Some(offset) => Err(TopicError::WildcardInName {
            offset,
            wildcard: char::from(bytes[offset]),
        }),
        None => Ok(()),
    }
}
