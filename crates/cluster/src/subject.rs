//! The reversible mapping between MQTT topics and NATS subjects.
//!
//! A topic `l1/l2/.../ln` travels on the subject `<prefix>.<root>.<t1>.<t2>...<tn>`, one NATS
//! token per MQTT level; the root is `msg` for QoS 0 and `rel` for QoS 1 and 2 (which the
//! stream `<base>_messages` also keeps, for replays: `reliable.rs`). A token is the level's text with every byte NATS reserves written
//! as `%` and two upper-case hex digits: `.` (`%2E`), `*` (`%2A`), `>` (`%3E`), the escape
//! character `%` itself (`%25`), whitespace and the other ASCII control characters. Every
//! other character (UTF-8 included) is kept. An empty level (as in `a//b` or `/a`) is the
//! token `%_`, which no escaped non-empty level can produce.
//!
//! A filter becomes the subjects a node subscribes to: `+` becomes `*`, `#` becomes `>`, and
//! since MQTT's `a/#` also matches `a` itself, a filter ending in `/#` gives two subjects:
//! `<prefix>.msg.a.>` and `<prefix>.msg.a` (and the same under `rel`). NATS wildcards also match topics starting with
//! `$` that MQTT's leading wildcards do not: the router makes the final decision on the
//! receiving node, so a subject only has to match at least what the filter matches.

use std::fmt::Write as _;

/// The token that stands for an empty topic level.
const EMPTY_LEVEL: &str = "%_";
/// The escape character.
const ESCAPE: u8 = b'%';

/// Why a subject is not one of [`topic_to_subject`]'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    /// The subject is not under `<prefix>.msg.` or `<prefix>.rel.`.
    #[error("subject `{0}` is not under the cluster's message prefix")]
    OutsidePrefix(String),
    /// A `%` not followed by two hex digits (or `_` alone).
    #[error("subject `{0}` has a malformed escape")]
    BadEscape(String),
    /// The unescaped bytes are not UTF-8.
    #[error("subject `{0}` does not decode to UTF-8")]
    NotUtf8(String),
}

/// Whether NATS reserves `byte` inside a token (or it is the escape character).
fn reserved(byte: u8) -> bool {
    matches!(byte, b'.' | b'*' | b'>' | ESCAPE)
        || byte.is_ascii_whitespace()
        || byte < 0x20
        || byte == 0x7F
}

/// One MQTT level as one NATS token.
pub fn escape_level(level: &str, out: &mut String) {
    if level.is_empty() {
        out.push_str(EMPTY_LEVEL);
        return;
    }
    let mut start = 0;
    for (index, byte) in level.bytes().enumerate() {
        if reserved(byte) {
            out.push_str(&level[start..index]);
            let _ = write!(out, "%{byte:02X}");
            start = index + 1;
        }
    }
    out.push_str(&level[start..]);
}

/// The MQTT level one NATS token stands for.
pub fn unescape_token(token: &str) -> Result<String, SubjectError> {
    if token == EMPTY_LEVEL {
        return Ok(String::new());
    }
    let bytes = token.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] != ESCAPE {
            out.push(bytes[index]);
            index += 1;
            continue;
        }
        let hex = token
            .get(index + 1..index + 3)
            .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            .filter(|byte| reserved(*byte))
            .ok_or_else(|| SubjectError::BadEscape(token.to_owned()))?;
        out.push(hex);
        index += 3;
    }
    String::from_utf8(out).map_err(|_| SubjectError::NotUtf8(token.to_owned()))
}

/// The two roots of message subjects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// `msg`: QoS 0, NATS core only.
    Messages,
    /// `rel`: QoS 1 and 2, also kept in the stream `<base>_messages` for replays.
    Reliable,
}

impl Root {
    /// Both, in the order a filter's subscriptions are taken.
    pub const BOTH: [Root; 2] = [Root::Messages, Root::Reliable];

    /// The root a message published with `qos` travels under.
    pub fn of(qos: codec::QoS) -> Self {
        match qos {
            codec::QoS::AtMostOnce => Root::Messages,
            _ => Root::Reliable,
        }
    }

    fn token(self) -> &'static str {
        match self {
            Root::Messages => "msg",
            Root::Reliable => "rel",
        }
    }
}

/// `<prefix>.msg` or `<prefix>.rel`: the root of message subjects.
pub fn message_root(prefix: &str, root: Root) -> String {
    format!("{prefix}.{}", root.token())
}

/// The subject a message on `topic` is published on under `root`.
pub fn topic_to_subject(prefix: &str, root: Root, topic: &str) -> String {
    let mut subject = String::with_capacity(prefix.len() + 5 + topic.len() + 8);
    subject.push_str(prefix);
    subject.push('.');
    subject.push_str(root.token());
    for level in topic.split('/') {
        subject.push('.');
        escape_level(level, &mut subject);
    }
    subject
}

/// The topic a subject of [`topic_to_subject`] (either root) came from.
pub fn subject_to_topic(prefix: &str, subject: &str) -> Result<String, SubjectError> {
    let tokens = subject
        .strip_prefix(prefix)
        .and_then(|rest| {
            rest.strip_prefix(".msg.")
                .or_else(|| rest.strip_prefix(".rel."))
        })
        .ok_or_else(|| SubjectError::OutsidePrefix(subject.to_owned()))?;
    let mut topic = String::with_capacity(tokens.len());
    for (index, token) in tokens.split('.').enumerate() {
        if index > 0 {
            topic.push('/');
        }
        topic.push_str(&unescape_token(token)?);
    }
    Ok(topic)
}

/// The subjects under `root` a node subscribes to for the MQTT topic filter `filter` (not
/// `$share/...`: pass its topic filter): one, or two for a filter ending in `#` below the root.
pub fn filter_subjects(prefix: &str, root: Root, filter: &str) -> Vec<String> {
    let mut subject = message_root(prefix, root);
    let levels: Vec<&str> = filter.split('/').collect();
    let mut parent = None;
    for (index, level) in levels.iter().enumerate() {
        if *level == "#" && index > 0 {
            parent = Some(subject.clone());
        }
        subject.push('.');
        match *level {
            "+" => subject.push('*'),
            "#" => subject.push('>'),
            text => escape_level(text, &mut subject),
        }
    }
    let mut subjects = vec![subject];
    subjects.extend(parent);
    subjects
}

/// NATS matching of `subject` against the subscription subject `pattern` (`*`: one token,
/// `>`: one or more trailing tokens).
pub fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut subject_tokens = subject.split('.');
    for token in pattern.split('.') {
        match (token, subject_tokens.next()) {
            (">", next) => return next.is_some(),
            (_, None) => return false,
            ("*", Some(_)) => {}
            (literal, Some(actual)) if literal == actual => {}
            _ => return false,
        }
    }
    subject_tokens.next().is_none()
}

/// The NATS queue group of the shared subscription `$share/<group>/<filter>` (its whole
/// text): every node derives the same name, and two shares differ in group or filter exactly
/// when their names differ.
pub fn queue_group(shared: &str) -> String {
    let mut queue = String::with_capacity(shared.len() + 8);
    for (index, level) in shared.split('/').enumerate() {
        if index > 0 {
            queue.push('/');
        }
        escape_level(level, &mut queue);
    }
    queue
}

#[cfg(test)]
#[path = "subject_tests.rs"]
mod tests;
