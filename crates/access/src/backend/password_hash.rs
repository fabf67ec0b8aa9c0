//! Password hashes that external stores keep (the Redis backend): mosquitto's `$6$` and `$7$`
//! (as in a password file, see [`crate::passwd`]) and mosquitto-go-auth's
//! `PBKDF2$ALGORITHM$ITERATIONS$SALT$HASH`.
//!
//! go-auth's PBKDF2 hash: `ALGORITHM` is `sha256` or `sha512` (PBKDF2-HMAC with that digest),
//! `HASH` is the derived key in standard, padded base64 (its length is the key length), and
//! `SALT` is the salt in standard base64 or, with go-auth's `salt_encoding utf-8`, the salt's
//! bytes as written.

use std::num::NonZeroU32;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::pbkdf2;

use crate::{LineProblem, passwd};

/// How the salt of a go-auth PBKDF2 hash is written (go-auth's `salt_encoding`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SaltEncoding {
    /// Standard, padded base64 (go-auth's default).
    #[default]
    Base64,
    /// The salt's bytes as they are (go-auth's `utf-8`).
    Utf8,
}

/// A stored hash this broker cannot check.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HashFormatError {
    /// A `$6$` or `$7$` hash that is malformed.
    #[error("{0}")]
    Mosquitto(#[from] LineProblem),
    /// A `PBKDF2$` hash that is malformed.
    #[error("malformed PBKDF2 hash: {0}")]
    Pbkdf2(&'static str),
    /// Neither kind.
    #[error("not a $6$, $7$ or PBKDF2$ hash")]
    Unsupported,
}

/// Whether `password` matches `hash` (compared in constant time).
pub(crate) fn verify(
    hash: &str,
    password: &[u8],
    salt_encoding: SaltEncoding,
) -> Result<bool, HashFormatError> {
    if hash.starts_with("PBKDF2$") {
        verify_go_auth_pbkdf2(hash, password, salt_encoding)
    } else if hash.starts_with('$') {
        Ok(passwd::verify_hash(hash, password)?)
    } else {
        Err(HashFormatError::Unsupported)
    }
}

fn verify_go_auth_pbkdf2(
    hash: &str,
    password: &[u8],
    salt_encoding: SaltEncoding,
) -> Result<bool, HashFormatError> {
    let malformed = HashFormatError::Pbkdf2;
    // go-auth splits at every `$` and drops empty fields.
    let fields: Vec<&str> = hash.split('$').filter(|field| !field.is_empty()).collect();
    let ["PBKDF2", algorithm, iterations, salt, derived] = fields[..] else {
        return Err(malformed("expected PBKDF2$ALGORITHM$ITERATIONS$SALT$HASH"));
    };
    let algorithm = match algorithm {
        "sha256" => pbkdf2::PBKDF2_HMAC_SHA256,
        "sha512" => pbkdf2::PBKDF2_HMAC_SHA512,
        _ => return Err(malformed("the algorithm is not sha256 or sha512")),
    };
    let iterations: NonZeroU32 = iterations
        .parse()
        .map_err(|_| malformed("the iteration count is not a positive integer"))?;
    let salt = match salt_encoding {
        SaltEncoding::Base64 => BASE64
            .decode(salt)
            .map_err(|_| malformed("the salt is not base64"))?,
        SaltEncoding::Utf8 => salt.as_bytes().to_vec(),
    };
    let derived = BASE64
        .decode(derived)
        .map_err(|_| malformed("the hash is not base64"))?;
    if derived.is_empty() {
        return Err(malformed("the hash is empty"));
    }
    Ok(pbkdf2::verify(algorithm, iterations, &salt, password, &derived).is_ok())
}
