//! Topic filters (what a SUBSCRIBE asks for), shared-subscription filters and their matching rule.

use bytes::Bytes;
use bytestring::ByteString;

use crate::error::TopicError;
use crate::topic::{TopicLimits, TopicName, check_common, split_level, validated_topic_text};

/// The prefix that marks a shared subscription (MQTT 5.0, 4.8.2).
pub const SHARE_PREFIX: &str = "$share/";

/// A validated topic filter: the common topic rules, `+` and `#` each occupying a whole level,
/// `#` only as the last level, and no `$share/` prefix (see [`SharedFilter`]).
///
/// Backed by a [`ByteString`]: cloning is a reference-count increment, reading it as text is
/// free.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicFilter(ByteString);

/// Checks the wildcard placement rules of a filter whose common rules already hold.
/// `base` is added to reported offsets (the filter may be the tail of a shared filter).
fn check_wildcards(bytes: &[u8], base: usize) -> Result<(), TopicError> {
    let mut start = 0;
    let mut rest = Some(bytes);
    while let Some(current) = rest {
        let (level, next) = split_level(current);
        let offset_of = |i: usize| base + start + i;
        if let Some(i) = level.iter().position(|&b| b == b'#') {
            if level.len() != 1 {
                return Err(TopicError::MultiLevelWildcardNotWholeLevel {
                    offset: offset_of(i),
                });
            }
            if next.is_some() {
                return Err(TopicError::MultiLevelWildcardNotLast {
                    offset: offset_of(i),
                });
            }
        }
        if let Some(i) = level.iter().position(|&b| b == b'+')
            && level.len() != 1
        {
            return Err(TopicError::SingleLevelWildcardNotWholeLevel {
                offset: offset_of(i),
            });
        }
        start += level.len() + 1;
        rest = next;
    }
    Ok(())
}

impl TopicFilter {
    /// Validates `text` as a plain (non-shared) topic filter (copies it).
    pub fn new(text: &str, limits: &TopicLimits) -> Result<Self, TopicError> {
        Self::from_bytes(Bytes::copy_from_slice(text.as_bytes()), limits)
    }

    /// Validates `bytes` as a plain (non-shared) topic filter without copying them.
    pub fn from_bytes(bytes: Bytes, limits: &TopicLimits) -> Result<Self, TopicError> {
        let text = check_common(bytes, limits)?;
        if text.starts_with(SHARE_PREFIX) {
            return Err(TopicError::SharePrefixInPlainFilter);
        }
        check_wildcards(text.as_bytes(), 0)?;
        Ok(Self(text))
    }

    /// Whether the filter has a `+` or `#` level (otherwise it matches exactly one topic name).
    #[inline]
    pub fn has_wildcards(&self) -> bool {
        self.as_bytes().iter().any(|&b| b == b'+' || b == b'#')
    }

    /// Whether the first level is a wildcard (such a filter does not match `$` topics).
    #[inline]
    pub fn starts_with_wildcard(&self) -> bool {
        matches!(self.as_bytes().first(), Some(b'+' | b'#'))
    }

    /// Whether this filter matches `topic`, by the rules of MQTT 4.7 (including the `$` rule).
    pub fn matches(&self, topic: &TopicName) -> bool {
        self.matches_text(topic.as_str())
    }

    /// [`Self::matches`] for a topic name's text that is already known to be valid (a
    /// PUBLISH the broker accepted): nothing is parsed or allocated.
    pub fn matches_text(&self, topic: &str) -> bool {
        self.matches_bytes(topic.as_bytes())
    }

    /// [`Self::matches_text`] for the bytes of a valid topic name.
    pub fn matches_bytes(&self, topic: &[u8]) -> bool {
        if topic.first() == Some(&b'$') && self.starts_with_wildcard() {
            return false;
        }
        let mut filter = Some(self.as_bytes());
        let mut name = Some(topic);
        loop {
            match (filter, name) {
                (None, None) => return true,
                (Some(f), _) if f == b"#" => return true,
                (Some(f), Some(n)) => {
                    let (f_level, f_rest) = split_level(f);
                    let (n_level, n_rest) = split_level(n);
                    if f_level != b"+" && f_level != n_level {
                        return false;
                    }
                    filter = f_rest;
                    name = n_rest;
                }
                _ => return false,
            }
        }
    }
}

validated_topic_text!(TopicFilter);

/// A validated shared-subscription filter `$share/{share name}/{filter}` (MQTT 5.0, 4.8.2).
///
/// The share name is non-empty and has no `/`, `+` or `#`; the filter follows the plain filter
/// rules. Two shared filters are the same group when share name and filter are equal.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SharedFilter {
    /// The whole `$share/...` text.
    full: ByteString,
    /// Byte offset of the topic filter inside `full`.
    filter_start: usize,
}

impl SharedFilter {
    /// Validates `text` as a shared filter (copies it).
    pub fn new(text: &str, limits: &TopicLimits) -> Result<Self, TopicError> {
        Self::from_bytes(Bytes::copy_from_slice(text.as_bytes()), limits)
    }

    /// Validates `bytes` as a shared filter without copying them. The length and level limits
    /// apply to the whole text.
    pub fn from_bytes(bytes: Bytes, limits: &TopicLimits) -> Result<Self, TopicError> {
        let full = check_common(bytes, limits)?;
        let bytes = full.as_bytes();
        let prefix = SHARE_PREFIX.len();
        let Some(after_prefix) = bytes.strip_prefix(SHARE_PREFIX.as_bytes()) else {
            return Err(TopicError::MissingSharePrefix);
        };
        let share_len = after_prefix
            .iter()
            .position(|&b| b == b'/')
            .unwrap_or(after_prefix.len());
        if share_len == 0 {
            return Err(TopicError::EmptyShareName);
        }
        let share = &after_prefix[..share_len];
        if let Some(i) = share.iter().position(|&b| b == b'+' || b == b'#') {
            return Err(TopicError::WildcardInShareName {
                offset: prefix + i,
                wildcard: char::from(share[i]),
            });
        }
        let filter_start = prefix + share_len + 1;
        if filter_start >= bytes.len() {
            return Err(TopicError::MissingSharedTopicFilter);
        }
        check_wildcards(&bytes[filter_start..], filter_start)?;
        Ok(Self { full, filter_start })
    }

    /// The share name (the group).
    pub fn share_name(&self) -> &str {
        let text = self.as_str();
        &text[SHARE_PREFIX.len()..self.filter_start - 1]
    }

    /// The topic filter the group subscribes to (a cheap slice of the same buffer).
    pub fn filter(&self) -> TopicFilter {
        TopicFilter(self.full.slice_ref(&self.full[self.filter_start..]))
    }

    /// The whole `$share/{share name}/{filter}` text.
    pub fn as_str(&self) -> &str {
        &self.full
    }

    /// A copy in its own allocation (see [`TopicFilter::detached`]).
    pub fn detached(&self) -> Self {
        Self {
            full: ByteString::from(self.as_str()),
            filter_start: self.filter_start,
        }
    }
}

impl std::fmt::Display for SharedFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for SharedFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedFilter({:?})", self.as_str())
    }
}

/// A filter from a SUBSCRIBE or UNSUBSCRIBE: plain or shared.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SubscriptionFilter {
    /// An ordinary subscription: every matching subscriber gets the message.
    Plain(TopicFilter),
    /// A shared subscription: one member of the group gets the message.
    Shared(SharedFilter),
}

impl SubscriptionFilter {
    /// Parses `text`: a `$share/` prefix makes it a [`SharedFilter`] (copies the text).
    pub fn new(text: &str, limits: &TopicLimits) -> Result<Self, TopicError> {
        Self::from_bytes(Bytes::copy_from_slice(text.as_bytes()), limits)
    }

    /// Parses `bytes` without copying them: a `$share/` prefix makes it a [`SharedFilter`].
    pub fn from_bytes(bytes: Bytes, limits: &TopicLimits) -> Result<Self, TopicError> {
        if bytes.starts_with(SHARE_PREFIX.as_bytes()) {
            SharedFilter::from_bytes(bytes, limits).map(Self::Shared)
        } else {
            TopicFilter::from_bytes(bytes, limits).map(Self::Plain)
        }
    }

    /// The topic filter that is matched against topic names.
    pub fn topic_filter(&self) -> TopicFilter {
        match self {
            Self::Plain(filter) => filter.clone(),
            Self::Shared(shared) => shared.filter(),
        }
    }

    /// The text as it appeared in the SUBSCRIBE.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Plain(filter) => filter.as_str(),
            Self::Shared(shared) => shared.as_str(),
        }
    }
}

impl std::str::FromStr for SubscriptionFilter {
    type Err = TopicError;

    /// Parses with [`TopicLimits::default`].
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::new(text, &TopicLimits::default())
    }
}

impl std::str::FromStr for SharedFilter {
    type Err = TopicError;

    /// Parses with [`TopicLimits::default`].
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::new(text, &TopicLimits::default())
    }
}
