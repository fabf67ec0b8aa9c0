//! The SCRAM credential file: one user and mechanism per line,
//! `username:MECHANISM:iterations:salt:StoredKey:ServerKey`, the last three in standard, padded
//! base64; blank lines and lines starting with `#` are skipped. A user may have one line per
//! mechanism (`SCRAM-SHA-256`, `SCRAM-SHA-512`). `ringmq scram add` writes these lines.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::{Mechanism, ScramCredential};
use crate::{AccessFileError, LineProblem, load_file, parse_lines};

/// The number of `:`-separated fields after the username.
const FIELDS_AFTER_USER: usize = 5;

/// The users of a SCRAM credential file.
#[derive(Debug, Clone, Default)]
pub struct ScramFile {
    users: HashMap<(String, Mechanism), ScramCredential>,
}

impl ScramFile {
    /// Parses the text of a credential file; an error names the bad line.
    pub fn parse(text: &str) -> Result<Self, AccessFileError> {
        let mut file = Self::default();
        parse_lines(text, |line| file.add_line(line))?;
        Ok(file)
    }

    /// Reads and parses the credential file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, AccessFileError> {
        load_file(path.as_ref(), Self::parse)
    }

    /// The credential of `username` for `mechanism`, if the file has one.
    pub fn credential(&self, username: &str, mechanism: Mechanism) -> Option<&ScramCredential> {
        self.users.get(&(username.to_owned(), mechanism))
    }

    /// The number of lines (user and mechanism pairs).
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether the file has no credentials.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    fn add_line(&mut self, line: &str) -> Result<(), LineProblem> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        let (username, credential) = parse_line(line)?;
        let key = (username.to_owned(), credential.mechanism);
        if self.users.insert(key, credential).is_some() {
            return Err(LineProblem::DuplicateUser(username.to_owned()));
        }
        Ok(())
    }
}

/// One line: the username (which may hold `:`) and its credential.
pub fn parse_line(line: &str) -> Result<(&str, ScramCredential), LineProblem> {
    let mut fields: Vec<&str> = line.rsplitn(FIELDS_AFTER_USER + 1, ':').collect();
    if fields.len() != FIELDS_AFTER_USER + 1 {
        return Err(LineProblem::MalformedScramLine);
    }
    fields.reverse();
    let [
        username,
        mechanism,
        iterations,
        salt,
        stored_key,
        server_key,
    ] = fields[..]
    else {
        return Err(LineProblem::MalformedScramLine);
    };
    if username.is_empty() {
        return Err(LineProblem::EmptyUsername);
    }
    let mechanism = Mechanism::from_name(mechanism)
        .ok_or_else(|| LineProblem::UnknownScramMechanism(mechanism.to_owned()))?;
    let iterations = iterations
        .parse::<NonZeroU32>()
        .map_err(|_| LineProblem::InvalidIterations(iterations.to_owned()))?;
    let credential = ScramCredential {
        mechanism,
        iterations,
        salt: decode(salt, "salt", None)?,
        stored_key: decode(stored_key, "StoredKey", Some(mechanism.key_len()))?,
        server_key: decode(server_key, "ServerKey", Some(mechanism.key_len()))?,
    };
    Ok((username, credential))
}

fn decode(text: &str, field: &'static str, len: Option<usize>) -> Result<Vec<u8>, LineProblem> {
    let bytes = BASE64
        .decode(text)
        .map_err(|_| LineProblem::InvalidBase64 { field })?;
    match len {
        Some(expected) if bytes.len() != expected => Err(LineProblem::WrongLength {
            field,
            actual: bytes.len(),
            expected,
        }),
        _ if bytes.is_empty() => Err(LineProblem::WrongLength {
            field,
            actual: 0,
            expected: super::SALT_LEN,
        }),
        _ => Ok(bytes),
    }
}

/// `text` (a credential file's) with `credential`'s line for `username`: it replaces the line
/// of the same user and mechanism, or is appended. Lines that do not parse are kept as they
/// are; a username that cannot be written on one line is an error.
pub fn with_credential(
    text: &str,
    username: &str,
    credential: &ScramCredential,
) -> Result<String, LineProblem> {
    if username.is_empty() {
        return Err(LineProblem::EmptyUsername);
    }
    if username.contains(['\n', '\r']) || username.starts_with('#') {
        return Err(LineProblem::MalformedScramLine);
    }
    let new_line = credential.file_line(username);
    let mut replaced = false;
    let mut lines: Vec<&str> = Vec::new();
    for line in text.lines() {
        let same = matches!(parse_line(line.trim()), Ok((user, existing))
            if user == username && existing.mechanism == credential.mechanism);
        if same && !replaced {
            lines.push(&new_line);
            replaced = true;
        } else if !same {
            lines.push(line);
        }
    }
    if !replaced {
        lines.push(&new_line);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}
