//! The topic filter of an ACL rule, split into levels when the file is parsed.
//!
//! [`RuleFilter::matches`] checks a topic without allocating: `pattern` substitutions (`%c`, `%u`)
//! are compared in place against the topic's bytes, so a client id containing `/` spans levels as
//! in mosquitto's string substitution, and wildcard characters in a client id or username stay
//! literal. [`overlaps`] and [`covers`] relate two filters for SUBSCRIBE.
//!
//! A filter whose first level is a wildcard matches no topic that starts with `$`
//! (MQTT-4.7.2-1): `#` and `+/x` do not match `$SYS/x`, `$SYS/#` does.

use std::borrow::Cow;

use smallvec::SmallVec;

use super::{ClientIdentity, LineProblem};

/// The longest topic filter MQTT can carry (a two-byte length).
const MAX_FILTER_LEN: usize = 65_535;

/// Whether `%c` and `%u` in the filter are substituted (`pattern` lines) or literal (`topic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Substitution {
    Literal,
    ClientIdAndUsername,
}

/// A parsed ACL topic filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuleFilter {
    levels: Box<[RuleLevel]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum RuleLevel {
    /// `+`
    SingleWildcard,
    /// `#` (last level only)
    MultiWildcard,
    /// Text that must equal the topic's text here.
    Text(Box<[Piece]>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(Box<str>),
    /// `%c` in a `pattern` line.
    ClientId,
    /// `%u` in a `pattern` line.
    Username,
}

/// One level of a filter, with substitutions made: what [`overlaps`] and [`covers`] compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Level<'a> {
    SingleWildcard,
    MultiWildcard,
    Literal(Cow<'a, str>),
}

/// The levels of a filter, inline for the usual depths.
pub(crate) type Levels<'a> = SmallVec<[Level<'a>; 8]>;

impl RuleFilter {
    /// Parses a filter of an ACL line, refusing what MQTT does not allow in a topic filter.
    pub(crate) fn parse(text: &str, substitution: Substitution) -> Result<Self, LineProblem> {
        let invalid = |reason| LineProblem::InvalidFilter {
            filter: text.to_owned(),
            reason,
        };
        if text.len() > MAX_FILTER_LEN {
            return Err(invalid("longer than 65535 bytes"));
        }
        if text.contains('\0') {
            return Err(invalid("contains a NUL character"));
        }
        let level_count = text.split('/').count();
        let levels = text
            .split('/')
            .enumerate()
            .map(|(index, level)| match level {
                "+" => Ok(RuleLevel::SingleWildcard),
                "#" if index + 1 == level_count => Ok(RuleLevel::MultiWildcard),
                "#" => Err(invalid("`#` must be the last level")),
                _ if level.contains(['+', '#']) => {
                    Err(invalid("`+` and `#` must occupy a whole level"))
                }
                _ => Ok(RuleLevel::Text(pieces(level, substitution))),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { levels })
    }

    /// The first level when it is plain text (no wildcard, no substitution): what an index of
    /// rules by first level files the rule under.
    pub(crate) fn literal_first_level(&self) -> Option<&str> {
        match self.levels.first()? {
            RuleLevel::Text(pieces) => match &pieces[..] {
                [Piece::Literal(text)] => Some(text),
                _ => None,
            },
            RuleLevel::SingleWildcard | RuleLevel::MultiWildcard => None,
        }
    }

    /// Whether the filter needs a username (`%u`): it applies to no anonymous client.
    #[cfg(test)]
    pub(crate) fn needs_username(&self) -> bool {
        self.pieces().any(|piece| *piece == Piece::Username)
    }

    /// Whether `topic` matches this filter for `client`. Allocation-free. A filter with `%u`
    /// matches nothing for a client without a username.
    pub(crate) fn matches(&self, client: &ClientIdentity<'_>, topic: &str) -> bool {
        if topic.starts_with('$') && self.starts_with_wildcard() {
            return false;
        }
        let mut rest = topic;
        for (index, level) in self.levels.iter().enumerate() {
            if index > 0 {
                match rest.strip_prefix('/') {
                    Some(after) => rest = after,
                    // "a/#" matches "a"; any other level needs one more topic level.
                    None => return rest.is_empty() && *level == RuleLevel::MultiWildcard,
                }
            }
            match level {
                RuleLevel::MultiWildcard => return true,
                RuleLevel::SingleWildcard => rest = &rest[rest.find('/').unwrap_or(rest.len())..],
                RuleLevel::Text(pieces) => match strip_pieces(rest, pieces, client) {
                    Some(after) => rest = after,
                    None => return false,
                },
            }
        }
        rest.is_empty()
    }

    /// The filter's levels for `client`, substitutions made and split at every `/` (a client id
    /// with `/` spans levels); `None` when it needs a username the client does not have. Allocates
    /// only for a level that joins a substitution with other text.
    pub(crate) fn levels_for<'a>(&'a self, client: &ClientIdentity<'a>) -> Option<Levels<'a>> {
        let mut levels = Levels::new();
        for level in self.levels.iter() {
            match level {
                RuleLevel::SingleWildcard => levels.push(Level::SingleWildcard),
                RuleLevel::MultiWildcard => levels.push(Level::MultiWildcard),
                RuleLevel::Text(pieces) => push_text_levels(&mut levels, pieces, client)?,
            }
        }
        Some(levels)
    }

    fn starts_with_wildcard(&self) -> bool {
        matches!(
            self.levels.first(),
            Some(RuleLevel::SingleWildcard | RuleLevel::MultiWildcard)
        )
    }

    #[cfg(test)]
    fn pieces(&self) -> impl Iterator<Item = &Piece> {
        self.levels.iter().flat_map(|level| match level {
            RuleLevel::Text(pieces) => pieces.iter(),
            _ => [].iter(),
        })
    }
}

/// Splits a level of a `pattern` into literal text, `%c` and `%u` (left to right, as mosquitto
/// does; any other `%` is literal). A `topic` level is one literal piece.
fn pieces(level: &str, substitution: Substitution) -> Box<[Piece]> {
    if substitution == Substitution::Literal {
        return Box::new([Piece::Literal(level.into())]);
    }
    let mut pieces = Vec::new();
    let mut literal_start = 0;
    let mut index = 0;
    while index < level.len() {
        let marker = match &level.as_bytes()[index..] {
            [b'%', b'c', ..] => Some(Piece::ClientId),
            [b'%', b'u', ..] => Some(Piece::Username),
            _ => None,
        };
        let Some(marker) = marker else {
            index += 1;
            continue;
        };
        if literal_start < index {
            pieces.push(Piece::Literal(level[literal_start..index].into()));
        }
        pieces.push(marker);
        index += 2;
        literal_start = index;
    }
    if literal_start < level.len() || pieces.is_empty() {
        pieces.push(Piece::Literal(level[literal_start..].into()));
    }
    pieces.into_boxed_slice()
}

/// The text a piece stands for, for `client`; `None` for `%u` without a username.
fn piece_text<'a>(piece: &'a Piece, client: &ClientIdentity<'a>) -> Option<&'a str> {
    match piece {
        Piece::Literal(text) => Some(text),
        Piece::ClientId => Some(client.client_id),
        Piece::Username => client.username,
    }
}

/// `topic` after the text of `pieces`, or `None` when it does not start with that text.
fn strip_pieces<'t>(
    mut topic: &'t str,
    pieces: &[Piece],
    client: &ClientIdentity<'_>,
) -> Option<&'t str> {
    for piece in pieces {
        topic = topic.strip_prefix(piece_text(piece, client)?)?;
    }
    Some(topic)
}

/// Pushes the literal levels of one text level (several when a substitution contains `/`).
fn push_text_levels<'a>(
    levels: &mut Levels<'a>,
    pieces: &'a [Piece],
    client: &ClientIdentity<'a>,
) -> Option<()> {
    if let [piece] = pieces {
        let text = piece_text(piece, client)?;
        levels.extend(
            text.split('/')
                .map(|part| Level::Literal(Cow::Borrowed(part))),
        );
        return Some(());
    }
    let mut joined = String::new();
    for piece in pieces {
        joined.push_str(piece_text(piece, client)?);
    }
    levels.extend(
        joined
            .split('/')
            .map(|part| Level::Literal(Cow::Owned(part.to_owned()))),
    );
    Some(())
}

/// Checks that `text` is a topic filter MQTT allows: not empty, at most 65535 bytes, no NUL,
/// `+` and `#` alone in their level, `#` last (for filters that come from outside the ACL file).
pub(crate) fn validate(text: &str) -> Result<(), LineProblem> {
    if text.is_empty() {
        return Err(LineProblem::InvalidFilter {
            filter: String::new(),
            reason: "empty",
        });
    }
    RuleFilter::parse(text, Substitution::Literal).map(drop)
}

/// The levels of a SUBSCRIBE filter (already validated by the broker; `$share/...` stripped).
pub(crate) fn subscription_levels(filter: &str) -> Levels<'_> {
    filter
        .split('/')
        .map(|level| match level {
            "+" => Level::SingleWildcard,
            "#" => Level::MultiWildcard,
            text => Level::Literal(Cow::Borrowed(text)),
        })
        .collect()
}

/// Whether some topic matches both filters. The empty topic counts: `/#` and `+` overlap
/// through it although MQTT forbids it, so `true` may be an over-estimate, never `false`.
pub(crate) fn overlaps(left: &[Level<'_>], right: &[Level<'_>]) -> bool {
    if excludes_dollar_topics_of(left, right) || excludes_dollar_topics_of(right, left) {
        return false;
    }
    let mut left = left.iter();
    let mut right = right.iter();
    loop {
        match (left.next(), right.next()) {
            (Some(Level::MultiWildcard), _) | (_, Some(Level::MultiWildcard)) => return true,
            (None, None) => return true,
            (None, Some(_)) | (Some(_), None) => return false,
            (Some(Level::SingleWildcard), Some(_)) | (Some(_), Some(Level::SingleWildcard)) => {}
            (Some(Level::Literal(l)), Some(Level::Literal(r))) => {
                if l != r {
                    return false;
                }
            }
        }
    }
}

/// Whether every topic that matches `inner` also matches `outer`. The empty topic counts: `/+/#`
/// does not cover `/#`, which matches it, so `false` may be an under-estimate, never `true`.
pub(crate) fn covers(outer: &[Level<'_>], inner: &[Level<'_>]) -> bool {
    if excludes_dollar_topics_of(outer, inner) {
        return false;
    }
    // A topic has at least one level, so `#` alone matches exactly what `+/#` matches.
    if matches!(inner, [Level::MultiWildcard])
        && matches!(outer, [Level::SingleWildcard, Level::MultiWildcard])
    {
        return true;
    }
    let mut outer = outer.iter();
    let mut inner = inner.iter();
    loop {
        match (outer.next(), inner.next()) {
            (Some(Level::MultiWildcard), _) | (None, None) => return true,
            (None, Some(_)) | (Some(_), None) | (Some(_), Some(Level::MultiWildcard)) => {
                return false;
            }
            (Some(Level::SingleWildcard), Some(_)) => {}
            (Some(Level::Literal(o)), Some(Level::Literal(i))) if o == i => {}
            (Some(Level::Literal(_)), Some(_)) => return false,
        }
    }
}

/// Whether `filter` starts with a wildcard while every topic of `other` starts with `$`: then
/// `filter` matches none of `other`'s topics.
fn excludes_dollar_topics_of(filter: &[Level<'_>], other: &[Level<'_>]) -> bool {
    let wildcard_first = matches!(
        filter.first(),
        Some(Level::SingleWildcard | Level::MultiWildcard)
    );
    let dollar_first = matches!(other.first(), Some(Level::Literal(text)) if text.starts_with('$'));
    wildcard_first && dollar_first
}
