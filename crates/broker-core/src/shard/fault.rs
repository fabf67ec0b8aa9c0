//! A protocol fault: why a connection is being closed, with the reason code the client gets.

use codec::{DecodeError, ReasonCode};

/// A connection-ending problem caused by the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The DISCONNECT (5.0) reason code.
    pub reason: ReasonCode,
    /// What went wrong, for the operator's debug log.
    pub detail: String,
}

impl Fault {
    /// A fault with `reason` and a description.
    pub fn new(reason: ReasonCode, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }

    /// A Protocol Error (0x82).
    pub fn protocol(detail: impl Into<String>) -> Self {
        Self::new(ReasonCode::ProtocolError, detail)
    }
}

impl From<DecodeError> for Fault {
    fn from(error: DecodeError) -> Self {
        Self::new(error.reason_code(), error.to_string())
    }
}
