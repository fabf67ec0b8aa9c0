//! Who may connect and what they may touch: RingMQ's access control, as a crate of its own.
//!
//! File-based access rules in mosquitto's formats:
//! - [`passwd`]: the password file written by `mosquitto_passwd` (`user:$7$...` PBKDF2-SHA512 and
//!   the older `user:$6$...` salted SHA-512), checked in constant time.
//! - [`acl`]: the ACL file (`topic`, `user`, `pattern` lines): which topics a client may read
//!   (subscribe, receive) and write (publish), and how much of a SUBSCRIBE filter it may read.
//! - [`scram`]: SCRAM-SHA-256/512 (RFC 5802, 7677) for MQTT 5's AUTH exchange: the credential
//!   file (salted keys, never the password) and the server's state machine.
//! - `filter` (private): ACL rule filters, matching a topic without allocating, and the
//!   overlap and cover relations between two filters that [`acl::AclFile::subscribe_scope`] uses.
//!
//! External backends, asked off the reactors:
//! - [`backend`]: the external login and topic backends (HTTP, Redis, JWT) and their rules.
//! - [`gatekeeper`]: the backend chain with its caches and worker threads, asked without
//!   blocking a reactor. A verdict goes back into the gatekeeper's own queue for the asking
//!   shard (a `SegQueue` per shard), then a [`ring_runtime::RuntimeControl`] wake-up makes that
//!   shard run a turn and take it (`Gatekeeper::take_verdicts`); ring-runtime's mailboxes are
//!   not used.
//! - [`settings`]: `[auth]`'s validated settings (the broker's config layer builds them).
//!
//! This crate parses rules and answers questions; it knows nothing of the shard, sessions or
//! the broker's config file. The broker decides where to ask, and what a refusal means.

#![forbid(unsafe_code)]

pub mod acl;
mod acl_line;
pub mod backend;
mod filter;
pub mod gatekeeper;
pub mod passwd;
pub mod scram;
pub mod settings;

/// Loopback ports for the servers the backend tests start (shared with the broker's tests).
#[cfg(test)]
#[path = "../../../tests/broker/ports.rs"]
mod test_ports;

#[cfg(test)]
#[path = "acl_tests.rs"]
mod acl_tests;
#[cfg(test)]
#[path = "filter_tests.rs"]
mod filter_tests;
#[cfg(test)]
#[path = "mosquitto_passwd_tests.rs"]
mod mosquitto_passwd_tests;

use std::path::{Path, PathBuf};

pub use acl::{AclFile, SubscribeScope};
pub use passwd::PasswordFile;

/// Who asks: the client id and, when the client sent one, the username of its CONNECT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIdentity<'a> {
    /// The client identifier (assigned by the broker when the client sent an empty one).
    pub client_id: &'a str,
    /// The CONNECT username; `None` for an anonymous client.
    pub username: Option<&'a str>,
}

/// What a client wants to do with a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Subscribe to it, or receive a message published to it.
    Read,
    /// Publish to it.
    Write,
}

/// A password or ACL file that could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum AccessFileError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why reading failed.
        #[source]
        source: std::io::Error,
    },
    /// A line of the file is malformed.
    #[error("{}line {line}: {problem}", path_prefix(path.as_deref()))]
    Line {
        /// The file, when the text came from [`PasswordFile::load`] or [`AclFile::load`].
        path: Option<PathBuf>,
        /// The line number, from 1.
        line: usize,
        /// What is wrong with it.
        problem: LineProblem,
    },
}

/// What is wrong with one line of a password or ACL file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    /// A password line without the `:` between username and hash.
    #[error("expected `username:hash`")]
    MissingColon,
    /// A password line with an empty username.
    #[error("empty username")]
    EmptyUsername,
    /// A second password line for the same user.
    #[error("duplicate user `{0}`")]
    DuplicateUser(String),
    /// A hash that is not `$6$` or `$7$` (e.g. a plain-text password).
    #[error(
        "unsupported password hash type `{0}` (expected $6$ or $7$ as written by mosquitto_passwd)"
    )]
    UnsupportedHashType(String),
    /// A SCRAM credential line without its six `:`-separated fields.
    #[error("expected `username:MECHANISM:iterations:salt:StoredKey:ServerKey`")]
    MalformedScramLine,
    /// A SCRAM credential line naming a mechanism other than SCRAM-SHA-256 or SCRAM-SHA-512.
    #[error("unknown SCRAM mechanism `{0}` (expected SCRAM-SHA-256 or SCRAM-SHA-512)")]
    UnknownScramMechanism(String),
    /// A `$6$` or `$7$` hash with the wrong number of `$`-separated fields.
    #[error("malformed password hash: expected {expected}")]
    MalformedHash {
        /// The layout the hash type has.
        expected: &'static str,
    },
    /// An iteration count that is not a positive integer.
    #[error("invalid PBKDF2 iteration count `{0}`")]
    InvalidIterations(String),
    /// A salt or hash that is not standard, padded base64.
    #[error("the {field} is not valid base64")]
    InvalidBase64 {
        /// `salt` or `hash`.
        field: &'static str,
    },
    /// A decoded salt or hash of the wrong length.
    #[error("the {field} is {actual} bytes long, expected {expected}")]
    WrongLength {
        /// `salt` or `hash`.
        field: &'static str,
        /// Its decoded length.
        actual: usize,
        /// The length mosquitto writes.
        expected: usize,
    },
    /// An ACL line that starts with something other than `topic`, `pattern` or `user`.
    #[error("unknown keyword `{0}` (expected topic, pattern or user)")]
    UnknownKeyword(String),
    /// A `topic` or `pattern` line without a topic.
    #[error("missing topic")]
    MissingTopic,
    /// A `user` line without a username.
    #[error("missing username")]
    MissingUsername,
    /// An access type other than read, write, readwrite or deny.
    #[error("invalid access `{0}` (expected read, write, readwrite or deny)")]
    InvalidAccess(String),
    /// A topic filter that MQTT does not allow.
    #[error("invalid topic filter `{filter}`: {reason}")]
    InvalidFilter {
        /// The filter as written.
        filter: String,
        /// Why it is invalid.
        reason: &'static str,
    },
}

impl AccessFileError {
    /// This error with the file it came from (line errors from `parse` carry none).
    fn in_file(self, file: &Path) -> Self {
        match self {
            Self::Line { line, problem, .. } => Self::Line {
                path: Some(file.to_path_buf()),
                line,
                problem,
            },
            other => other,
        }
    }
}

fn path_prefix(path: Option<&Path>) -> String {
    path.map(|path| format!("{}: ", path.display()))
        .unwrap_or_default()
}

/// Parses every line of `text` with `add_line`, numbering lines from 1 for errors.
fn parse_lines(
    text: &str,
    mut add_line: impl FnMut(&str) -> Result<(), LineProblem>,
) -> Result<(), AccessFileError> {
    for (index, line) in text.lines().enumerate() {
        add_line(line).map_err(|problem| AccessFileError::Line {
            path: None,
            line: index + 1,
            problem,
        })?;
    }
    Ok(())
}

/// Reads `path` and parses it with `parse`; errors name the path.
fn load_file<T>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<T, AccessFileError>,
) -> Result<T, AccessFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| AccessFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|error| error.in_file(path))
}
