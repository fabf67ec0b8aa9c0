//! Version 1: one line of US-ASCII, `PROXY TCP4 192.0.2.1 198.51.100.1 51000 1883\r\n`, at most
//! [`V1_MAX_LEN`] bytes. `PROXY UNKNOWN` may be followed by anything up to the `\r\n`.

use std::net::{IpAddr, SocketAddr};

use super::error::{ProxyError, V1Part};
use super::header::{Parsed, ProxyAddresses, ProxyHeader, ProxyVersion, V1_MAX_LEN};

const PREFIX: &[u8] = b"PROXY ";

/// Parses a version 1 line at the start of `buf` (which starts with `P`).
pub(super) fn parse(buf: &[u8]) -> Result<Parsed, ProxyError> {
    let prefix = &PREFIX[..buf.len().min(PREFIX.len())];
    if !buf.starts_with(prefix) {
        return Err(ProxyError::NoHeader);
    }
    let window = &buf[..buf.len().min(V1_MAX_LEN)];
    let Some(end) = window.windows(2).position(|pair| pair == b"\r\n") else {
        return match buf.len() >= V1_MAX_LEN {
            true => Err(ProxyError::V1TooLong),
            false => Ok(Parsed::NeedMore),
        };
    };
    let line = &buf[PREFIX.len().min(end)..end];
    let header = ProxyHeader {
        version: ProxyVersion::V1,
        addresses: addresses(line)?,
    };
    Ok(Parsed::Done {
        header,
        len: end + 2,
    })
}

/// What follows `PROXY `: the protocol and, for TCP4 and TCP6, the four fields.
fn addresses(line: &[u8]) -> Result<Option<ProxyAddresses>, ProxyError> {
    if line == b"UNKNOWN" || line.starts_with(b"UNKNOWN ") {
        return Ok(None);
    }
    let line = std::str::from_utf8(line)
        .ok()
        .filter(|text| text.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
        .ok_or(ProxyError::V1Malformed(V1Part::Text))?;
    let (protocol, rest) = line
        .split_once(' ')
        .ok_or(ProxyError::V1Malformed(V1Part::Protocol))?;
    let v4 = match protocol {
        "TCP4" => true,
        "TCP6" => false,
        _ => return Err(ProxyError::V1Malformed(V1Part::Protocol)),
    };
    let fields: Vec<&str> = rest.split(' ').collect();
    let [source, destination, source_port, destination_port] = fields[..] else {
        return Err(ProxyError::V1Malformed(V1Part::Fields));
    };
    Ok(Some(ProxyAddresses {
        source: SocketAddr::new(address(source, v4)?, port(source_port)?),
        destination: SocketAddr::new(address(destination, v4)?, port(destination_port)?),
    }))
}

/// An address of the line's family (Rust's parser refuses IPv4 octets with leading zeros).
fn address(text: &str, v4: bool) -> Result<IpAddr, ProxyError> {
    let ip: IpAddr = text
        .parse()
        .map_err(|_| ProxyError::V1Malformed(V1Part::Address))?;
    match ip.is_ipv4() == v4 {
        true => Ok(ip),
        false => Err(ProxyError::V1Malformed(V1Part::Address)),
    }
}

/// A port: decimal, 0..=65535, no leading zero.
fn port(text: &str) -> Result<u16, ProxyError> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = text.len() > 1 && text.starts_with('0');
    match digits && !leading_zero {
        true => text
            .parse()
            .map_err(|_| ProxyError::V1Malformed(V1Part::Port)),
        false => Err(ProxyError::V1Malformed(V1Part::Port)),
    }
}
