//! MQTT over QUIC (issue 51; docs/transports.md, "QUIC"): a [`QuicDriver`] per shard behind
//! ring-runtime's datagram seam, quinn-proto's sans-I/O state machine inside. The MQTT
//! connection rides the client's first bidirectional stream (ALPN `mqtt`, as EMQX's MQTT over
//! QUIC), so the broker above sees MQTT bytes as from TCP or TLS. The server's connection ids
//! name the shard that owns the connection ([`cid`]): a datagram that lands on another shard
//! (after the client's address changed, say) is forwarded to the owner.

pub mod cid;
mod config;
mod conn;
mod counters;
mod driver;

pub use crate::config::QuicSettings;
pub use config::QuicListenerConfig;
pub use counters::QuicCounters;
pub use driver::QuicDriver;

use std::sync::Arc;

use ring_runtime::DatagramListen;

use crate::config::QuicListener;
use crate::error::TransportError;

/// The runtime's datagram endpoints for `listeners`: each one's certificate and key read
/// once, a [`QuicDriver`] per shard counting in `counters`; an error names the file or the
/// problem.
pub fn datagram_endpoints(
    listeners: &[QuicListener],
    counters: &Arc<QuicCounters>,
) -> Result<Vec<DatagramListen>, TransportError> {
    listeners
        .iter()
        .map(|listener| {
            let config = QuicListenerConfig::load(&listener.settings, Arc::clone(counters))?;
            Ok(DatagramListen {
                addr: listener.bind,
                driver: Arc::new(move |setup| Box::new(QuicDriver::new(config.clone(), setup))),
            })
        })
        .collect()
}

/// The ALPN protocol id of MQTT over QUIC.
pub const ALPN: &[u8] = b"mqtt";
