//! [`parse`]: which version the first byte announces, then that version's parser.

use super::error::ProxyError;
use super::header::Parsed;
use super::{v1, v2};

/// Parses the header at the start of `buf` (everything received on the connection so far).
pub fn parse(buf: &[u8]) -> Result<Parsed, ProxyError> {
    match buf.first() {
        None => Ok(Parsed::NeedMore),
        Some(b'P') => v1::parse(buf),
        Some(b'\r') => v2::parse(buf),
        Some(_) => Err(ProxyError::NoHeader),
    }
}
