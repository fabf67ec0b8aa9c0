//! Why a backend could not be set up from its settings.

/// A backend's settings that cannot work (checked once, when the backend is made).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A URL that does not parse or names an unsupported scheme.
    #[error("{backend}: invalid URL {url}: {reason}")]
    InvalidUrl {
        /// Which backend.
        backend: &'static str,
        /// The URL (for Redis, without its password).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting with a value that cannot work (a zero timeout).
    #[error("{backend}: {setting}: {reason}")]
    InvalidSetting {
        /// Which backend.
        backend: &'static str,
        /// The setting's field name.
        setting: &'static str,
        /// What is wrong with its value.
        reason: &'static str,
    },
    /// The JWT backend without any key to verify tokens with.
    #[error(
        "jwt: no key configured (set at least one of hs256_secret, rs256_public_key_pem, \
         es256_public_key_pem)"
    )]
    NoJwtKey,
    /// A JWT key that cannot be used.
    #[error("jwt: invalid {algorithm} key: {reason}")]
    InvalidKey {
        /// `HS256`, `RS256` or `ES256`.
        algorithm: &'static str,
        /// Why it cannot be used.
        reason: String,
    },
}

/// Refuses a zero `timeout` (every request would fail at once).
pub(crate) fn check_timeout(
    backend: &'static str,
    timeout: std::time::Duration,
) -> Result<(), SetupError> {
    if timeout.is_zero() {
        return Err(SetupError::InvalidSetting {
            backend,
            setting: "timeout",
            reason: "must be more than zero",
        });
    }
    Ok(())
}
