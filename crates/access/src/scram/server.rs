//! One SCRAM exchange, the server's side: [`ScramServer::start`] takes client-first and
//! answers server-first; [`ScramServer::finish`] takes client-final, checks the proof and
//! answers server-final. An unknown user gets a server-first like a known one's (a salt derived
//! from a per-process secret) and fails only at the proof, so the exchange does not tell which
//! users exist.

use std::num::NonZeroU32;
use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::error::ScramError;
use super::message::{client_final, client_first};
use super::{DEFAULT_ITERATIONS, Mechanism, SALT_LEN, ScramCredential, random_bytes};
use crate::passwd::constant_time_eq;

/// The bytes of randomness in the server's part of the nonce.
const SERVER_NONCE_BYTES: usize = 18;

/// What a successful exchange ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramSuccess {
    /// The user the exchange authenticated.
    pub username: String,
    /// server-final (`v=...`), for the client to check the server.
    pub server_final: Vec<u8>,
}

/// An exchange that sent server-first and waits for client-final.
#[derive(Debug, Clone)]
pub struct ScramServer {
    mechanism: Mechanism,
    username: String,
    /// `None`: an unknown user, answered with a decoy salt.
    credential: Option<ScramCredential>,
    /// The GS2 header of client-first, as `c=` must repeat it (base64).
    gs2_base64: String,
    /// The whole nonce (client's then server's).
    nonce: String,
    /// client-first-message-bare "," server-first-message: the AuthMessage without its end.
    auth_prefix: String,
}

impl ScramServer {
    /// Starts an exchange from client-first; `lookup` gives the user's credential. Returns the
    /// exchange and server-first.
    pub fn start(
        mechanism: Mechanism,
        client_first_message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<(Self, Vec<u8>), ScramError> {
        let nonce = random_bytes::<SERVER_NONCE_BYTES>().map_err(|_| ScramError::Random)?;
        let server_nonce = BASE64.encode(nonce);
        Self::start_with_nonce(mechanism, client_first_message, lookup, &server_nonce)
    }

    /// [`Self::start`] with a given server nonce (RFC test vectors).
    pub(crate) fn start_with_nonce(
        mechanism: Mechanism,
        client_first_message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
        server_nonce: &str,
    ) -> Result<(Self, Vec<u8>), ScramError> {
        let text = std::str::from_utf8(client_first_message).map_err(|_| ScramError::NotUtf8)?;
        let first = client_first(text)?;
        let credential = lookup(&first.username).filter(|c| c.mechanism == mechanism);
        let (salt, iterations) = match &credential {
            Some(credential) => (credential.salt.clone(), credential.iterations),
            None => decoy_salt(mechanism, &first.username),
        };
        let nonce = format!("{}{server_nonce}", first.nonce);
        let server_first = format!("r={nonce},s={},i={iterations}", BASE64.encode(salt));
        let server = Self {
            mechanism,
            auth_prefix: format!("{},{server_first}", first.bare),
            gs2_base64: BASE64.encode(first.gs2_header),
            username: first.username,
            credential,
            nonce,
        };
        Ok((server, server_first.into_bytes()))
    }

    /// The username client-first named.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The mechanism of this exchange.
    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Checks client-final; on success, server-final.
    pub fn finish(self, client_final_message: &[u8]) -> Result<ScramSuccess, ScramError> {
        let text = std::str::from_utf8(client_final_message).map_err(|_| ScramError::NotUtf8)?;
        let last = client_final(text)?;
        if last.nonce != self.nonce {
            return Err(ScramError::NonceMismatch);
        }
        if last.channel_binding != self.gs2_base64 {
            return Err(ScramError::ChannelBindingMismatch);
        }
        let proof = BASE64
            .decode(last.proof)
            .map_err(|_| ScramError::MalformedProof)?;
        if proof.len() != self.mechanism.key_len() {
            return Err(ScramError::MalformedProof);
        }
        let auth_message = format!("{},{}", self.auth_prefix, last.without_proof);
        let mechanism = self.mechanism;
        let Some(credential) = &self.credential else {
            // The work of a known user's wrong proof, so the time taken tells nothing either.
            let decoy_key = vec![0u8; mechanism.key_len()];
            let signature = mechanism.mac(&decoy_key, auth_message.as_bytes());
            let _ = mechanism.hash(signature.as_ref());
            return Err(ScramError::UnknownUser);
        };
        let signature = mechanism.mac(&credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = proof
            .iter()
            .zip(signature.as_ref())
            .map(|(p, s)| p ^ s)
            .collect();
        let stored_key = mechanism.hash(&client_key);
        if !constant_time_eq(stored_key.as_ref(), &credential.stored_key) {
            return Err(ScramError::WrongProof);
        }
        let server_signature = mechanism.mac(&credential.server_key, auth_message.as_bytes());
        let server_final = format!("v={}", BASE64.encode(server_signature.as_ref()));
        Ok(ScramSuccess {
            username: self.username,
            server_final: server_final.into_bytes(),
        })
    }
}

/// The salt and iterations shown for an unknown user: stable for a name while the process
/// runs, derived from a secret drawn once, so they look like a real user's.
fn decoy_salt(mechanism: Mechanism, username: &str) -> (Vec<u8>, NonZeroU32) {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    let secret = SECRET.get_or_init(|| random_bytes().unwrap_or([0x5a; 32]));
    let tag = mechanism.mac(secret, username.as_bytes());
    let iterations = NonZeroU32::new(DEFAULT_ITERATIONS).expect("invariant: not zero");
    (tag.as_ref()[..SALT_LEN].to_vec(), iterations)
}
