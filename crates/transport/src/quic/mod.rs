//! MQTT over QUIC (issue 51; docs/transports.md, "QUIC"): a [`QuicDriver`] per shard behind
//! ring-runtime's datagram seam, quinn-proto's sans-I/O state machine inside. The MQTT
//! connection rides the client's first bidirectional stream (ALPN `mqtt`, as EMQX's MQTT over
//! QUIC), so the broker above sees MQTT bytes as from TCP or TLS. The server's connection ids
//! name the shard that owns the connection ([`cid`]): a datagram that lands on another shard
//! (after the client's address changed, say) is forwarded to the owner. A resumed client may
//! send in 0-RTT; what of it the broker acts on before the handshake completes is [`early`]'s
//! rule (replay-safe packets only).

pub mod cid;
mod client;
mod client_conn;
mod config;
mod conn;
mod counters;
mod driver;
mod early;
mod links;
mod listeners;
mod stream;

pub use crate::config::QuicSettings;
pub use client::{QuicClientDriver, QuicConnector};
pub use config::ALPN;
pub use config::QuicListenerConfig;
pub use counters::QuicCounters;
pub use driver::QuicDriver;
pub use listeners::QuicListeners;
