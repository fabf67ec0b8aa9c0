//! One line of an ACL file, as mosquitto reads it.
//!
//! `topic [read|write|readwrite|deny] <topic>`, `pattern [read|write|readwrite|deny] <topic>`,
//! `user <username>`; blank lines and lines starting with `#` are skipped. Without an access
//! word the access is readwrite; a topic after an access word may contain spaces.

use super::LineProblem;

/// What a rule does for the topics its filter matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleAccess {
    Read,
    Write,
    ReadWrite,
    /// Refuses both, whatever other rules grant.
    Deny,
}

/// A parsed line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AclLine<'a> {
    /// Blank or a comment.
    Nothing,
    /// `user <username>`: the `topic` lines after it are that user's.
    User(&'a str),
    /// `topic ...`: a rule for the current user section (or every client before any `user`).
    Topic(RuleAccess, &'a str),
    /// `pattern ...`: a rule for every client, with `%c` and `%u` substituted.
    Pattern(RuleAccess, &'a str),
}

impl<'a> AclLine<'a> {
    pub(crate) fn parse(line: &'a str) -> Result<Self, LineProblem> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(Self::Nothing);
        }
        let (keyword, rest) = split_word(line);
        match keyword {
            "user" if rest.is_empty() => Err(LineProblem::MissingUsername),
            "user" => Ok(Self::User(rest)),
            "topic" => {
                let (access, topic) = access_and_topic(rest)?;
                Ok(Self::Topic(access, topic))
            }
            "pattern" => {
                let (access, topic) = access_and_topic(rest)?;
                Ok(Self::Pattern(access, topic))
            }
            other => Err(LineProblem::UnknownKeyword(other.to_owned())),
        }
    }
}

/// The first word of `text` and the rest, both trimmed.
fn split_word(text: &str) -> (&str, &str) {
    match text.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim()),
        None => (text, ""),
    }
}

/// `[access] <topic>`: a single word is the topic, with readwrite access.
fn access_and_topic(text: &str) -> Result<(RuleAccess, &str), LineProblem> {
    match split_word(text) {
        ("", _) => Err(LineProblem::MissingTopic),
        (topic, "") => Ok((RuleAccess::ReadWrite, topic)),
        (access, topic) => Ok((parse_access(access)?, topic)),
    }
}

fn parse_access(word: &str) -> Result<RuleAccess, LineProblem> {
    match word {
        "read" => Ok(RuleAccess::Read),
        "write" => Ok(RuleAccess::Write),
        "readwrite" => Ok(RuleAccess::ReadWrite),
        "deny" => Ok(RuleAccess::Deny),
        other => Err(LineProblem::InvalidAccess(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_lines_with_and_without_access() {
        assert_eq!(
            AclLine::parse("topic a/#"),
            Ok(AclLine::Topic(RuleAccess::ReadWrite, "a/#"))
        );
        assert_eq!(
            AclLine::parse("  topic   read   a/b  "),
            Ok(AclLine::Topic(RuleAccess::Read, "a/b"))
        );
        assert_eq!(
            AclLine::parse("topic write with space/x"),
            Ok(AclLine::Topic(RuleAccess::Write, "with space/x"))
        );
        assert_eq!(
            AclLine::parse("pattern deny c/%c"),
            Ok(AclLine::Pattern(RuleAccess::Deny, "c/%c"))
        );
        assert_eq!(
            AclLine::parse("topic read"),
            Ok(AclLine::Topic(RuleAccess::ReadWrite, "read"))
        );
    }

    #[test]
    fn users_comments_and_blanks() {
        assert_eq!(
            AclLine::parse("user  bob smith "),
            Ok(AclLine::User("bob smith"))
        );
        assert_eq!(AclLine::parse("# topic a"), Ok(AclLine::Nothing));
        assert_eq!(AclLine::parse("\t"), Ok(AclLine::Nothing));
    }

    #[test]
    fn malformed_lines() {
        assert_eq!(AclLine::parse("user"), Err(LineProblem::MissingUsername));
        assert_eq!(AclLine::parse("topic"), Err(LineProblem::MissingTopic));
        assert_eq!(
            AclLine::parse("topic rw a/b"),
            Err(LineProblem::InvalidAccess("rw".to_owned()))
        );
        assert_eq!(
            AclLine::parse("topics a/b"),
            Err(LineProblem::UnknownKeyword("topics".to_owned()))
        );
    }
}
