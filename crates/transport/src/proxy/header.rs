//! What a PROXY protocol header says ([`ProxyHeader`]), what the bytes so far hold
//! ([`Parsed`]), and the bounds on a header's length.

use std::net::SocketAddr;

/// The longest version 1 header, `\r\n` included (the specification's bound).
pub const V1_MAX_LEN: usize = 107;

/// The longest version 2 header accepted, its 16-byte head included: room for the address
/// block and the TLVs a balancer adds (TLS details, a unique id, AWS's VPC endpoint id),
/// refused beyond.
pub const MAX_HEADER_LEN: usize = 4096;

/// Which version of the protocol a header spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyVersion {
    V1,
    V2,
}

/// A complete header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyHeader {
    pub version: ProxyVersion,
    /// The client's and the balancer's addresses, when the header carries them.
    pub addresses: Option<ProxyAddresses>,
}

/// The two ends of the connection the balancer accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyAddresses {
    /// The client.
    pub source: SocketAddr,
    /// The address the client connected to (the balancer's).
    pub destination: SocketAddr,
}

impl ProxyHeader {
    /// The client's address, when the header names one.
    pub fn source(&self) -> Option<SocketAddr> {
        self.addresses.map(|a| a.source)
    }
}

/// What the bytes received so far hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A prefix of a valid header: wait for more bytes.
    NeedMore,
    /// A complete header, `len` bytes long.
    Done { header: ProxyHeader, len: usize },
}
