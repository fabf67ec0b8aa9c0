//! [`ProxyError`]: why the bytes a connection started with are not a PROXY protocol header the
//! broker accepts. The connection is closed; nothing of it reaches TLS, WebSocket or MQTT.

/// Why a PROXY protocol header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// The connection starts with neither `PROXY ` nor the version 2 signature (a client that
    /// connected directly, not through the balancer).
    #[error("no PROXY protocol header (the connection did not come through the load balancer)")]
    NoHeader,
    /// A version 1 line without `\r\n` in its first 107 bytes.
    #[error("PROXY v1 line longer than 107 bytes")]
    V1TooLong,
    /// A version 1 line that does not follow the format: the part named.
    #[error("PROXY v1 line: bad {0}")]
    V1Malformed(V1Part),
    /// A version 2 head whose version nibble is not 2.
    #[error("PROXY v2 header: version {0}, not 2")]
    V2Version(u8),
    /// A version 2 command other than LOCAL (0) or PROXY (1).
    #[error("PROXY v2 header: unknown command {0}")]
    V2Command(u8),
    /// A version 2 address family or transport protocol the specification does not define.
    #[error("PROXY v2 header: unknown family and protocol byte {0:#04x}")]
    V2Family(u8),
    /// A version 2 address block shorter than its family's addresses.
    #[error("PROXY v2 header: {len}-byte address block, {family} needs {needed}")]
    V2ShortAddresses {
        family: &'static str,
        len: usize,
        needed: usize,
    },
    /// A version 2 header longer than [`super::header::MAX_HEADER_LEN`].
    #[error("PROXY v2 header of {0} bytes, over the {max}-byte bound", max = super::header::MAX_HEADER_LEN)]
    V2TooLong(usize),
    /// The shared partial-packet budget had no room for the bytes of a header split over reads.
    #[error("{0} bytes of a PROXY header: no room left in the shared partial-packet budget")]
    OverBudget(usize),
}

/// The part of a version 1 line found malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V1Part {
    /// Not `PROXY ` followed by `TCP4`, `TCP6` or `UNKNOWN`.
    Protocol,
    /// Not exactly four fields after the protocol, each separated by one space.
    Fields,
    /// An address that is not of the protocol's family, or not in canonical form.
    Address,
    /// A port that is not a decimal number in 0..=65535 without leading zeros.
    Port,
    /// A byte that is not printable ASCII before the `\r\n`.
    Text,
}

impl std::fmt::Display for V1Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Protocol => "protocol (TCP4, TCP6 or UNKNOWN)",
            Self::Fields => "fields (SRC DST SRCPORT DSTPORT, one space apart)",
            Self::Address => "address",
            Self::Port => "port",
            Self::Text => "character",
        })
    }
}
