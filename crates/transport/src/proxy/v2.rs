//! Version 2: a 16-byte binary head (the 12-byte signature, version and command, family and
//! protocol, the length of what follows), the address block, then TLVs, which are skipped.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::error::ProxyError;
use super::header::{MAX_HEADER_LEN, Parsed, ProxyAddresses, ProxyHeader, ProxyVersion};

/// The version 2 signature.
const SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";

/// The head: signature, version and command, family and protocol, length.
const HEAD_LEN: usize = 16;

/// Parses a version 2 header at the start of `buf` (which starts with `\r`).
pub(super) fn parse(buf: &[u8]) -> Result<Parsed, ProxyError> {
    let signature = &buf[..buf.len().min(SIGNATURE.len())];
    if !SIGNATURE.starts_with(signature) {
        return Err(ProxyError::NoHeader);
    }
    let Some(head) = buf.get(..HEAD_LEN) else {
        return Ok(Parsed::NeedMore);
    };
    let (version, command) = (head[12] >> 4, head[12] & 0x0f);
    if version != 2 {
        return Err(ProxyError::V2Version(version));
    }
    let local = match command {
        0 => true,
        1 => false,
        other => return Err(ProxyError::V2Command(other)),
    };
    let family = Family::of(head[13])?;
    let len = HEAD_LEN + usize::from(u16::from_be_bytes([head[14], head[15]]));
    if len > MAX_HEADER_LEN {
        return Err(ProxyError::V2TooLong(len));
    }
    let Some(block) = buf.get(HEAD_LEN..len) else {
        return Ok(Parsed::NeedMore);
    };
    let addresses = match local {
        true => None,
        false => family.addresses(block)?,
    };
    let header = ProxyHeader {
        version: ProxyVersion::V2,
        addresses,
    };
    Ok(Parsed::Done { header, len })
}

/// The family and protocol byte, of the combinations the specification defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// TCP over IPv4.
    Tcp4,
    /// TCP over IPv6.
    Tcp6,
    /// UNSPEC, UDP or UNIX: no TCP client address; the connection's own peer stands.
    Other,
}

impl Family {
    fn of(byte: u8) -> Result<Self, ProxyError> {
        let (family, protocol) = (byte >> 4, byte & 0x0f);
        if family > 3 || protocol > 2 {
            return Err(ProxyError::V2Family(byte));
        }
        Ok(match byte {
            0x11 => Self::Tcp4,
            0x21 => Self::Tcp6,
            _ => Self::Other,
        })
    }

    /// The addresses at the start of `block` (the rest is TLVs).
    fn addresses(self, block: &[u8]) -> Result<Option<ProxyAddresses>, ProxyError> {
        let (name, width) = match self {
            Self::Tcp4 => ("TCP over IPv4", 4),
            Self::Tcp6 => ("TCP over IPv6", 16),
            Self::Other => return Ok(None),
        };
        let needed = 2 * width + 4;
        if block.len() < needed {
            return Err(ProxyError::V2ShortAddresses {
                family: name,
                len: block.len(),
                needed,
            });
        }
        let ip = |at: usize| ip_at(&block[at..at + width]);
        let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
        Ok(Some(ProxyAddresses {
            source: SocketAddr::new(ip(0), port(2 * width)),
            destination: SocketAddr::new(ip(width), port(2 * width + 2)),
        }))
    }
}

/// A 4- or 16-byte address in network order.
fn ip_at(bytes: &[u8]) -> IpAddr {
    match <[u8; 4]>::try_from(bytes) {
        Ok(v4) => IpAddr::V4(Ipv4Addr::from(v4)),
        Err(_) => {
            let mut v6 = [0u8; 16];
            v6.copy_from_slice(bytes);
            IpAddr::V6(Ipv6Addr::from(v6))
        }
    }
}
