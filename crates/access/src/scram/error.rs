//! [`ScramError`]: why a SCRAM exchange failed.

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    /// A message that is not UTF-8.
    #[error("the SCRAM message is not UTF-8")]
    NotUtf8,
    /// A message that does not follow RFC 5802's syntax.
    #[error("malformed SCRAM message: {0}")]
    Malformed(&'static str),
    /// A message without an attribute it must have.
    #[error("malformed SCRAM message: attribute `{0}=` missing where expected")]
    MissingAttribute(char),
    /// The client asked for channel binding (`p=`), which MQTT over this broker does not offer.
    #[error("channel binding (p=) is not supported")]
    ChannelBindingUnsupported,
    /// client-final's nonce is not the one of server-first.
    #[error("the client-final nonce does not match")]
    NonceMismatch,
    /// client-final's `c=` is not the base64 of the GS2 header of client-first.
    #[error("the client-final channel binding does not match the GS2 header")]
    ChannelBindingMismatch,
    /// The proof is not valid base64 or of the wrong length.
    #[error("malformed SCRAM message: the proof is not valid")]
    MalformedProof,
    /// The user has no credential for this mechanism.
    #[error("unknown user")]
    UnknownUser,
    /// The proof does not match the stored key: a wrong password.
    #[error("wrong proof (password)")]
    WrongProof,
    /// The system's random number generator failed.
    #[error("the system random number generator failed")]
    Random,
}
