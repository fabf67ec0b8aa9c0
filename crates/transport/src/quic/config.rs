//! What a QUIC listener is configured with: its TLS settings (as a TLS listener's) and the
//! transport's bounds, made into quinn-proto's endpoint and server configs once, shared by
//! every shard's driver.

use std::sync::{Arc, RwLock};

use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{EndpointConfig, IdleTimeout, ServerConfig, TransportConfig, VarInt};

use super::cid::ShardCids;
use super::counters::QuicCounters;
use crate::config::QuicSettings;
use crate::error::TransportError;

/// The ALPN protocol id of MQTT over QUIC.
pub const ALPN: &[u8] = b"mqtt";

/// The configs every shard's endpoint of one listener is built from; its server config (the
/// certificate) is swapped in place by [`Self::reload`], for the handshakes after it.
#[derive(Clone)]
pub struct QuicListenerConfig {
    server: Arc<RwLock<Arc<ServerConfig>>>,
    settings: QuicSettings,
    pub(crate) max_connections: usize,
    /// The client certificate's Common Name becomes the username.
    pub(crate) identity_as_username: bool,
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
        Ok(Self {
            server: Arc::new(RwLock::new(Arc::new(server_config(settings)?))),
            settings: settings.clone(),
            max_connections: settings.max_connections_per_shard,
            identity_as_username: settings.tls.identity_as_username,
            counters,
        })
    }

    /// Reads the certificate, key and CA files again: new handshakes use them, open
    /// connections keep theirs. On an error the old ones stay.
    pub fn reload(&self) -> Result<(), TransportError> {
        let fresh = Arc::new(server_config(&self.settings)?);
        // A poisoned lock only means a panic elsewhere while swapping one Arc: the value is whole.
        *self.server.write().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }

    /// The server config a handshake starting now uses.
    pub(crate) fn current(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.server.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The endpoint config of the driver on `shard`: connection ids that name it.
    pub(crate) fn endpoint(shard: usize) -> Arc<EndpointConfig> {
        let mut endpoint = EndpointConfig::default();
        endpoint.cid_generator(move || Box::new(ShardCids::new(shard)));
        Arc::new(endpoint)
    }
}

/// quinn-proto's server config for `settings`: the certificate (TLS 1.3, ALPN `mqtt`) and the
/// transport's bounds.
fn server_config(settings: &QuicSettings) -> Result<ServerConfig, TransportError> {
    let mut tls = crate::tls::quic_tls_config(&settings.tls, ALPN)?;
    resumption(&mut tls, settings);
    let crypto = QuicServerConfig::try_from(tls)
        .map_err(|e| TransportError::Tls(format!("QUIC needs TLS 1.3: {e}")))?;
    let mut server = ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(transport(settings)?));
    server.max_incoming(settings.max_connections_per_shard.max(1));
    Ok(server)
}

/// Resumption through tickets the listener keeps (`resumption_tickets` at most): rustls takes
/// a ticket out when a client presents it, so each resumes one handshake and a replayed
/// ClientHello gets a full handshake, its 0-RTT data discarded. A reload (new certificates,
/// a new CRL) starts an empty store: no session resumes past it. 0-RTT (QUIC allows only
/// "unlimited" early data, bounded here by the stream window) where `zero_rtt` is on.
fn resumption(tls: &mut rustls::ServerConfig, settings: &QuicSettings) {
    if settings.resumption_tickets == 0 {
        tls.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        tls.send_tls13_tickets = 0;
        return;
    }
    tls.session_storage =
        rustls::server::ServerSessionMemoryCache::new(settings.resumption_tickets);
    if settings.zero_rtt {
        tls.max_early_data_size = u32::MAX;
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
