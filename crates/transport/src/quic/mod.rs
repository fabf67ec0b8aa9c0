//! MQTT over QUIC (issue 51; docs/transports.md, "QUIC"): a [`QuicDriver`] per shard behind
//! ring-runtime's datagram seam, quinn-proto's sans-I/O state machine inside. The MQTT
//! connection rides the client's first bidirectional stream (ALPN `mqtt`, as EMQX's MQTT over
//! QUIC), so the broker above sees MQTT bytes as from TCP or TLS. The server's connection ids
//! name the shard that owns the connection ([`cid`]): a datagram that lands on another shard
//! (after the client's address changed, say) is forwarded to the owner.

pub mod cid;
mod config;
mod conn;
mod driver;

pub use config::{QuicListenerConfig, QuicSettings};
pub use driver::QuicDriver;

/// The ALPN protocol id of MQTT over QUIC.
pub const ALPN: &[u8] = b"mqtt";
