//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, for MQTT 5's enhanced
//! authentication (the AUTH exchange; the broker core drives the rounds).
//!
//! - [`ScramCredential`]: what is stored of a password: the salt, the iteration count, and the
//!   StoredKey and ServerKey derived from the salted password (PBKDF2 runs only when a user is
//!   added, [`ScramCredential::derive`]); the password itself is never kept.
//! - [`file`](mod@file): the credential file (`user:MECHANISM:iterations:salt:StoredKey:ServerKey`).
//! - [`server`]: one exchange, client-first → server-first → client-final → server-final; the
//!   proof is checked with a few HMACs and a constant-time comparison.
//! - `message` (private): the attribute syntax of the client's two messages.

mod error;
pub mod file;
mod message;
pub mod server;

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;

use std::num::NonZeroU32;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::{digest, hmac, pbkdf2};

pub use error::ScramError;
pub use file::ScramFile;
pub use server::{ScramServer, ScramSuccess};

/// The iteration count `ringmq scram add` uses unless told otherwise (RFC 7677's minimum).
pub const DEFAULT_ITERATIONS: u32 = 4096;
/// The salt length `ringmq scram add` draws.
pub const SALT_LEN: usize = 16;

/// A SCRAM mechanism: the hash it is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// SCRAM-SHA-256 (RFC 7677).
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl Mechanism {
    /// Both mechanisms.
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    /// Its SASL name, which is also the MQTT Authentication Method.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name` (exactly, as SASL names are upper case).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The length of its hash, and so of every key.
    pub fn key_len(self) -> usize {
        self.digest().output_len()
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Self::Sha256 => &digest::SHA256,
            Self::Sha512 => &digest::SHA512,
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            Self::Sha256 => hmac::HMAC_SHA256,
            Self::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            Self::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Self::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// HMAC(key, data).
    fn mac(self, key: &[u8], data: &[u8]) -> hmac::Tag {
        hmac::sign(&hmac::Key::new(self.hmac(), key), data)
    }

    /// H(data).
    fn hash(self, data: &[u8]) -> digest::Digest {
        digest::digest(self.digest(), data)
    }
}

/// One user's stored SCRAM secrets for one mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The mechanism these keys are for.
    pub mechanism: Mechanism,
    /// The PBKDF2 iteration count.
    pub iterations: NonZeroU32,
    /// The salt.
    pub salt: Vec<u8>,
    /// H(HMAC(SaltedPassword, "Client Key")).
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key").
    pub server_key: Vec<u8>,
}

impl ScramCredential {
    /// The credential of `password` with `salt` (PBKDF2: slow by design, for adding a user).
    pub fn derive(
        mechanism: Mechanism,
        password: &[u8],
        salt: &[u8],
        iterations: NonZeroU32,
    ) -> Self {
        let mut salted = vec![0u8; mechanism.key_len()];
        pbkdf2::derive(mechanism.pbkdf2(), iterations, salt, password, &mut salted);
        let client_key = mechanism.mac(&salted, b"Client Key");
        Self {
            mechanism,
            iterations,
            salt: salt.to_vec(),
            stored_key: mechanism.hash(client_key.as_ref()).as_ref().to_vec(),
            server_key: mechanism.mac(&salted, b"Server Key").as_ref().to_vec(),
        }
    }

    /// The credential of `password` with a fresh random salt.
    pub fn with_random_salt(
        mechanism: Mechanism,
        password: &[u8],
        iterations: NonZeroU32,
    ) -> Result<Self, ring::error::Unspecified> {
        let salt: [u8; SALT_LEN] = random_bytes()?;
        Ok(Self::derive(mechanism, password, &salt, iterations))
    }

    /// Its line in a credential file, for `username`.
    pub fn file_line(&self, username: &str) -> String {
        format!(
            "{username}:{}:{}:{}:{}:{}",
            self.mechanism.name(),
            self.iterations,
            BASE64.encode(&self.salt),
            BASE64.encode(&self.stored_key),
            BASE64.encode(&self.server_key),
        )
    }
}

/// `N` bytes from the operating system's CSPRNG.
fn random_bytes<const N: usize>() -> Result<[u8; N], ring::error::Unspecified> {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; N];
    ring::rand::SystemRandom::new().fill(&mut bytes)?;
    Ok(bytes)
}
