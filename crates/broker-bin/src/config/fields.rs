//! The validation helpers every section shares: a required key, a bounded integer, a listen
//! address, whether an address is loopback-only. A leaf: it imports nothing but the error.

use std::net::{SocketAddr, ToSocketAddrs};

use super::error::ConfigError;

/// A required key's value, or an error naming it.
pub(super) fn need<T: Clone>(key: &'static str, value: &Option<T>) -> Result<T, ConfigError> {
    value
        .clone()
        .ok_or_else(|| ConfigError::invalid(key, "missing (and no default)"))
}

/// A required integer in `min..=max`.
pub(super) fn in_range(
    key: &'static str,
    value: &Option<u64>,
    min: u64,
    max: u64,
) -> Result<u64, ConfigError> {
    let v = need(key, value)?;
    if v < min || v > max {
        return Err(ConfigError::invalid(
            key,
            format!("{v} is out of range {min}..={max}"),
        ));
    }
    Ok(v)
}

/// A bounded integer narrowed to its typed width; the range check makes the conversion exact.
pub(super) fn narrow<T: TryFrom<u64>>(
    key: &'static str,
    v: &Option<u64>,
    min: u64,
    max: u64,
) -> Result<T, ConfigError> {
    let wide = in_range(key, v, min, max)?;
    T::try_from(wide).map_err(|_| ConfigError::invalid(key, format!("{wide} does not fit")))
}

/// An integer (its default already filled in) in `min..=max`.
pub(super) fn ranged(
    key: &'static str,
    value: u64,
    min: u64,
    max: u64,
) -> Result<u64, ConfigError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::invalid(
            key,
            format!("{value} is out of range {min}..={max}"),
        ))
    }
}

/// Parses `HOST:PORT` (an IP literal or `localhost`) into one socket address.
pub(super) fn parse_listen_addr(key: &'static str, text: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let mut resolved = text
        .to_socket_addrs()
        .map_err(|e| ConfigError::invalid(key, format!("{text:?} is not HOST:PORT ({e})")))?;
    resolved
        .next()
        .ok_or_else(|| ConfigError::invalid(key, format!("{text:?} resolves to no address")))
}

/// Whether `addr` is reachable only from this host.
pub(super) fn is_loopback(addr: &SocketAddr) -> bool {
    match addr {
        SocketAddr::V4(v4) => v4.ip().is_loopback(),
        SocketAddr::V6(v6) => {
            v6.ip().is_loopback() || v6.ip().to_ipv4_mapped().is_some_and(|ip| ip.is_loopback())
        }
    }
}
