//! The PROXY protocol (HAProxy's `proxy-protocol.txt`, versions 1 and 2), sans I/O: a load
//! balancer in front of the broker starts each connection with a header naming the client's
//! address, and the broker uses that address instead of the balancer's.
//!
//! [`parse`] looks at the bytes received so far and says [`Parsed::NeedMore`],
//! [`Parsed::Done`] (the header and its length: what follows belongs to TLS, WebSocket or
//! MQTT) or a [`ProxyError`]. [`ProxyReader`] keeps a partial header between reads, bounded by
//! [`MAX_HEADER_LEN`] and charged to the broker's hold budget.
//!
//! - Version 1: one text line, `PROXY TCP4|TCP6 SRC DST SRCPORT DSTPORT\r\n` or
//!   `PROXY UNKNOWN ...\r\n`, at most [`V1_MAX_LEN`] bytes.
//! - Version 2: a 16-byte binary head (the 12-byte signature, version and command, family and
//!   protocol, length), then the address block and TLVs (skipped). The `LOCAL` command and the
//!   `UNSPEC` family carry no client address.
//!
//! A header without a client address ([`ProxyHeader::source`] is `None`: v1 `UNKNOWN`, v2
//! `LOCAL` or `UNSPEC`, the balancer's own health checks) means: use the connection's own peer.
//! Whether a connection's header may be believed at all (the peer is a trusted balancer) is
//! the caller's question ([`crate::ProxyTrust`]).

mod error;
mod header;
mod parse;
mod reader;
mod trust;
mod v1;
mod v2;

#[cfg(test)]
mod tests;

pub use error::{ProxyError, V1Part};
pub use header::{MAX_HEADER_LEN, Parsed, ProxyAddresses, ProxyHeader, ProxyVersion, V1_MAX_LEN};
pub use parse::parse;
pub use reader::{ProxyReader, ReadStep};
pub use trust::ProxyTrust;
