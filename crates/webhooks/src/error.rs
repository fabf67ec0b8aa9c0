//! Why a webhook cannot be set up.

/// A webhook setting that cannot work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhookError {
    #[error("webhook url {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("webhook {url}: no events: name at least one of {known}")]
    NoEvents { url: String, known: String },
    #[error("webhook {url}: topic filter {filter:?} is not valid: {reason}")]
    InvalidTopic {
        url: String,
        filter: String,
        reason: String,
    },
    #[error("webhook {url}: {what} must be at least 1")]
    Zero { url: String, what: &'static str },
    #[error("webhook {url}: cannot start its thread: {reason}")]
    Thread { url: String, reason: String },
}
