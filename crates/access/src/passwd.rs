//! mosquitto's password file, as `mosquitto_passwd` (mosquitto 2.0) writes it.
//!
//! One `username:hash` per line; blank lines and lines starting with `#` are skipped. Two hash
//! types, both with a 12-byte salt and a 64-byte hash in standard, padded base64:
//!
//! - `$7$ITERATIONS$SALT$HASH`: PBKDF2-HMAC-SHA512 of the password with the salt
//!   (`mosquitto_passwd`'s default since 2.0, 101 iterations);
//! - `$6$SALT$HASH`: SHA-512 over the password bytes followed by the salt bytes (mosquitto 1.6
//!   and earlier, `mosquitto_passwd -H sha512`).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::{digest, pbkdf2};

use super::{AccessFileError, LineProblem, load_file, parse_lines};

/// The salt length `mosquitto_passwd` writes and mosquitto requires.
const SALT_LEN: usize = 12;
/// The SHA-512 output length, the length of both hash types.
const HASH_LEN: usize = 64;

/// The users of a password file and their password hashes.
#[derive(Debug, Clone)]
pub struct PasswordFile {
    users: HashMap<String, PasswordHash>,
    /// The most expensive hash of the file, computed (and ignored) for unknown users so that the
    /// time `verify` takes does not tell which users exist.
    decoy: Option<PasswordHash>,
}

impl PasswordFile {
    /// Parses the text of a password file.
    pub fn parse(text: &str) -> Result<Self, AccessFileError> {
        let mut users = HashMap::new();
        parse_lines(text, |line| add_user_line(&mut users, line))?;
        let decoy = users.values().max_by_key(|hash| hash.cost()).cloned();
        Ok(Self { users, decoy })
    }

    /// Reads and parses the password file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, AccessFileError> {
        load_file(path.as_ref(), Self::parse)
    }

    /// Whether `password` is the password of `username`. An unknown user costs as much as a
    /// known one; the hash comparison is constant-time.
    pub fn verify(&self, username: &str, password: &[u8]) -> bool {
        match self.users.get(username) {
            Some(hash) => hash.matches(password),
            None => {
                if let Some(decoy) = &self.decoy {
                    std::hint::black_box(decoy.matches(password));
                }
                false
            }
        }
    }

    /// The number of users.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether the file has no users.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// Whether `password` matches one hash in mosquitto's format (`$6$SALT$HASH` or
/// `$7$ITERATIONS$SALT$HASH`, what follows `username:` in a password file), compared in constant
/// time; an error when `hash` is not such a hash. For hashes kept elsewhere than in a password
/// file (the Redis backend).
pub fn verify_hash(hash: &str, password: &[u8]) -> Result<bool, LineProblem> {
    Ok(PasswordHash::parse(hash)?.matches(password))
}

fn add_user_line(users: &mut HashMap<String, PasswordHash>, line: &str) -> Result<(), LineProblem> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(());
    }
    let (username, hash) = line.split_once(':').ok_or(LineProblem::MissingColon)?;
    let username = username.trim();
    if username.is_empty() {
        return Err(LineProblem::EmptyUsername);
    }
    let hash = PasswordHash::parse(hash.trim())?;
    if users.insert(username.to_owned(), hash).is_some() {
        return Err(LineProblem::DuplicateUser(username.to_owned()));
    }
    Ok(())
}

/// One user's password hash.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PasswordHash {
    /// `$6$`: SHA-512(password ‖ salt).
    Sha512 {
        salt: [u8; SALT_LEN],
        hash: [u8; HASH_LEN],
    },
    /// `$7$`: PBKDF2-HMAC-SHA512(password, salt, iterations), 64 bytes.
    Pbkdf2Sha512 {
        iterations: NonZeroU32,
        salt: [u8; SALT_LEN],
        hash: [u8; HASH_LEN],
    },
}

impl PasswordHash {
    /// Parses the part after `username:`.
    fn parse(text: &str) -> Result<Self, LineProblem> {
        let fields: Vec<&str> = text.split('$').collect();
        match fields.as_slice() {
            ["", "6", salt, hash] => Ok(Self::Sha512 {
                salt: decode(salt, "salt")?,
                hash: decode(hash, "hash")?,
            }),
            ["", "7", iterations, salt, hash] => Ok(Self::Pbkdf2Sha512 {
                iterations: parse_iterations(iterations)?,
                salt: decode(salt, "salt")?,
                hash: decode(hash, "hash")?,
            }),
            ["", "6", ..] => Err(LineProblem::MalformedHash {
                expected: "$6$SALT$HASH",
            }),
            ["", "7", ..] => Err(LineProblem::MalformedHash {
                expected: "$7$ITERATIONS$SALT$HASH",
            }),
            ["", kind, ..] => Err(LineProblem::UnsupportedHashType(format!("${kind}$"))),
            _ => Err(LineProblem::UnsupportedHashType(
                "plain text (convert the file with mosquitto_passwd -U)".to_owned(),
            )),
        }
    }

    /// Whether `password` hashes to this hash (compared in constant time).
    fn matches(&self, password: &[u8]) -> bool {
        match self {
            Self::Sha512 { salt, hash } => {
                let mut context = digest::Context::new(&digest::SHA512);
                context.update(password);
                context.update(salt);
                constant_time_eq(context.finish().as_ref(), hash)
            }
            Self::Pbkdf2Sha512 {
                iterations,
                salt,
                hash,
            } => pbkdf2::verify(
                pbkdf2::PBKDF2_HMAC_SHA512,
                *iterations,
                salt,
                password,
                hash,
            )
            .is_ok(),
        }
    }

    /// A measure of how long `matches` takes (PBKDF2 iterations; 1 for a single SHA-512).
    fn cost(&self) -> u32 {
        match self {
            Self::Sha512 { .. } => 1,
            Self::Pbkdf2Sha512 { iterations, .. } => iterations.get(),
        }
    }
}

fn parse_iterations(text: &str) -> Result<NonZeroU32, LineProblem> {
    text.parse()
        .map_err(|_| LineProblem::InvalidIterations(text.to_owned()))
}

/// Decodes a base64 field that must be exactly `N` bytes long.
fn decode<const N: usize>(text: &str, field: &'static str) -> Result<[u8; N], LineProblem> {
    let bytes = BASE64
        .decode(text)
        .map_err(|_| LineProblem::InvalidBase64 { field })?;
    let actual = bytes.len();
    bytes.try_into().map_err(|_| LineProblem::WrongLength {
        field,
        actual,
        expected: N,
    })
}

/// Compares two byte strings in time that depends only on their lengths.
pub(crate) fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    let difference = left
        .iter()
        .zip(right)
        .fold(0u8, |acc, (a, b)| acc | std::hint::black_box(a ^ b));
    difference == 0
}

#[cfg(test)]
#[path = "passwd_tests.rs"]
mod tests;
