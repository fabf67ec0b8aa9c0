//! The router's typed errors: one variant per topic rule, one per replication fault.

use thiserror::Error;

/// Why a topic name, topic filter or shared-subscription filter was rejected.
///
/// Offsets are byte offsets into the rejected input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum TopicError {
    /// Topic names and filters must be at least one character long (MQTT 4.7.3).
    #[error("topic is empty")]
    Empty,
    /// Longer than the configured (and at most the protocol's 65,535 byte) limit.
    #[error("topic is {len} bytes long, the limit is {max}")]
    TooLong {
        /// Length of the input in bytes.
        len: usize,
        /// The limit in force.
        max: usize,
    },
    /// More `/`-separated levels than the configured limit.
    #[error("topic has {levels} levels, the limit is {max}")]
    TooManyLevels {
        /// Number of levels in the input.
        levels: usize,
        /// The limit in force.
        max: usize,
    },
    /// The bytes are not UTF-8.
    #[error("topic is not valid UTF-8 (valid up to byte {valid_up_to})")]
    InvalidUtf8 {
        /// Length of the valid UTF-8 prefix.
        valid_up_to: usize,
    },
    /// U+0000 is not allowed anywhere in a topic (MQTT 4.7.3).
    #[error("topic contains U+0000 at byte {offset}")]
    NullCharacter {
        /// Where the NUL was found.
        offset: usize,
    },
    /// A topic name (PUBLISH, retained) contains `+` or `#`.
    #[error("topic name contains the wildcard {wildcard:?} at byte {offset}")]
    WildcardInName {
        /// Where the wildcard was found.
        offset: usize,
        /// The wildcard character.
        wildcard: char,
    },
    /// `+` does not occupy a whole level of the filter.
    #[error("'+' must occupy a whole level (byte {offset})")]
    SingleLevelWildcardNotWholeLevel {
        /// Where the misplaced `+` was found.
        offset: usize,
    },
    /// `#` does not occupy a whole level of the filter.
    #[error("'#' must occupy a whole level (byte {offset})")]
    MultiLevelWildcardNotWholeLevel {
        /// Where the misplaced `#` was found.
        offset: usize,
    },
    /// `#` is followed by further levels.
    #[error("'#' must be the last level (byte {offset})")]
    MultiLevelWildcardNotLast {
        /// Where the misplaced `#` was found.
        offset: usize,
    },
    /// A plain topic filter starts with `$share/`: parse it as a shared filter instead.
    #[error("filter starts with '$share/': it is a shared-subscription filter")]
    SharePrefixInPlainFilter,
    /// A shared filter was expected but the text does not start with `$share/`.
    #[error("shared-subscription filter does not start with '$share/'")]
    MissingSharePrefix,
    /// `$share/` is followed directly by `/` (or nothing): the share name is empty.
    #[error("shared subscription has an empty share name")]
    EmptyShareName,
    /// The share name contains `+` or `#` (MQTT 4.8.2).
    #[error("share name contains the wildcard {wildcard:?} at byte {offset}")]
    WildcardInShareName {
        /// Where the wildcard was found.
        offset: usize,
        /// The wildcard character.
        wildcard: char,
    },
    /// The share name is not followed by `/` and a non-empty topic filter (MQTT 4.8.2).
    #[error("shared subscription has no topic filter after the share name")]
    MissingSharedTopicFilter,
}
