//! What a QUIC listener is configured with: its TLS settings (as a TLS listener's) and the
//! transport's bounds, made into quinn-proto's endpoint and server configs once, shared by
//! every shard's driver.

use std::sync::Arc;

use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{EndpointConfig, IdleTimeout, ServerConfig, TransportConfig, VarInt};

use super::cid::ShardCids;
use super::counters::QuicCounters;
use crate::config::QuicSettings;
use crate::error::TransportError;

/// The configs every shard's endpoint of one listener is built from.
#[derive(Clone)]
pub struct QuicListenerConfig {
    pub(crate) server: Arc<ServerConfig>,
    pub(crate) max_connections: usize,
    pub(crate) counters: Arc<QuicCounters>,
}

impl std::fmt::Debug for QuicListenerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicListenerConfig")
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

impl QuicListenerConfig {
    /// Reads the certificate and key; the drivers count in `counters`. An error names the
    /// file or the problem.
    pub fn load(
        settings: &QuicSettings,
        counters: Arc<QuicCounters>,
    ) -> Result<Self, TransportError> {
        let tls = crate::tls::quic_tls_config(&settings.tls, super::ALPN)?;
        let crypto = QuicServerConfig::try_from(tls)
            .map_err(|e| TransportError::Tls(format!("QUIC needs TLS 1.3: {e}")))?;
        let mut server = ServerConfig::with_crypto(Arc::new(crypto));
        server.transport_config(Arc::new(transport(settings)?));
        // The MQTT connection rides one bidirectional stream: a peer may not open more.
        server.max_incoming(settings.max_connections_per_shard.max(1));
        Ok(Self {
            server: Arc::new(server),
            max_connections: settings.max_connections_per_shard,
            counters,
        })
    }

    /// The endpoint config of the driver on `shard`: connection ids that name it.
    pub(crate) fn endpoint(shard: usize) -> Arc<EndpointConfig> {
        let mut endpoint = EndpointConfig::default();
        endpoint.cid_generator(move || Box::new(ShardCids::new(shard)));
        Arc::new(endpoint)
    }
}

fn transport(settings: &QuicSettings) -> Result<TransportConfig, TransportError> {
    let mut transport = TransportConfig::default();
    let idle = IdleTimeout::try_from(settings.idle_timeout)
        .map_err(|_| TransportError::Tls("QUIC idle timeout out of range".into()))?;
    transport.max_idle_timeout(Some(idle));
    // The broker pings a third of the idle timeout apart: a live client that sends nothing
    // (a long MQTT keep-alive) keeps its connection, a gone one times out; whether the MQTT
    // session is alive stays the keep-alive check's to decide, as on TCP.
    transport.keep_alive_interval(Some(settings.idle_timeout / 3));
    transport.max_concurrent_bidi_streams(VarInt::from_u32(1));
    transport.max_concurrent_uni_streams(VarInt::from_u32(0));
    transport.stream_receive_window(VarInt::from_u32(settings.stream_window));
    transport.receive_window(VarInt::from_u32(settings.stream_window));
    transport.datagram_receive_buffer_size(None);
    Ok(transport)
}
