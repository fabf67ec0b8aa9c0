//! The client side of MQTT over QUIC (the load generator's): a [`QuicConnector`] holds what
//! every connection of a run uses (quinn-proto's client config: the run's CA file, TLS 1.3,
//! ALPN `mqtt`), and builds one [`QuicClientDriver`] per shard for a ring-runtime client
//! endpoint (`RuntimeConfig::datagram_clients`: a UDP socket of the shard's own, so the
//! server's packets come back to the shard that connected).
//!
//! The handler asks for a connection with `ShardCtx::connect_datagram`; the driver starts the
//! handshake, and once it completes opens the MQTT stream and reports the connect
//! (`client_conn.rs`). Deadlines go through `DriverIo::set_deadline`, as the server's.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{
    ClientConfig, ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig, TransportConfig,
    VarInt,
};
use ring_runtime::{
    ConnId, Datagram, DatagramDriver, DriverClose, DriverFactory, DriverIo, DriverSetup,
};

use super::client_conn::ClientConn;
use super::config::ALPN;
use super::links::{Links, send};
use crate::config::ClientSettings;
use crate::error::ClientError;

/// What every QUIC connection of a run uses.
pub struct QuicConnector {
    config: ClientConfig,
    /// The name the server certificate must carry; `None`: the server's IP address.
    server_name: Option<String>,
}

impl std::fmt::Debug for QuicConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicConnector")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl QuicConnector {
    /// The connector for `settings`: QUIC needs `tls_ca` (the server's certificate is
    /// verified against it) and takes no WebSocket path.
    pub fn new(settings: &ClientSettings) -> Result<Arc<Self>, ClientError> {
        let Some(ca) = &settings.tls_ca else {
            return Err(ClientError::Quic("a CA file (--tls-ca) is required".into()));
        };
        if settings.ws.is_some() {
            return Err(ClientError::Quic(
                "MQTT rides a QUIC stream, not WebSocket".into(),
            ));
        }
        if let Some(name) = &settings.tls_server_name {
            crate::client::server_name(name)?;
        }
        let mut tls = crate::client::tls13_config(ca)?;
        tls.alpn_protocols = vec![ALPN.to_vec()];
        let crypto = QuicClientConfig::try_from(tls)
            .map_err(|e| ClientError::Quic(format!("QUIC needs TLS 1.3: {e}")))?;
        let mut config = ClientConfig::new(Arc::new(crypto));
        config.transport_config(Arc::new(transport()));
        Ok(Arc::new(Self {
            config,
            server_name: settings.tls_server_name.clone(),
        }))
    }

    /// The factory of every shard's driver, for `RuntimeConfig::datagram_clients`.
    pub fn driver_factory(self: &Arc<Self>) -> DriverFactory {
        let connector = Arc::clone(self);
        Arc::new(move |setup: DriverSetup| {
            Box::new(QuicClientDriver::new(Arc::clone(&connector), setup))
                as Box<dyn DatagramDriver>
        })
    }

    /// The name the certificate of `server` must carry.
    fn name_for(&self, server: SocketAddr) -> String {
        self.server_name
            .clone()
            .unwrap_or_else(|| server.ip().to_string())
    }
}

/// The client's transport: one bidirectional stream of its own, none from the server (the
/// server keeps the connection alive with its pings).
fn transport() -> TransportConfig {
    let mut transport = TransportConfig::default();
    transport.max_concurrent_bidi_streams(VarInt::from_u32(0));
    transport.max_concurrent_uni_streams(VarInt::from_u32(0));
    transport.datagram_receive_buffer_size(None);
    transport
}

/// One shard's QUIC client endpoint and its connections.
pub struct QuicClientDriver {
    endpoint: Endpoint,
    connector: Arc<QuicConnector>,
    setup: DriverSetup,
    links: Links<ClientConn>,
}

impl QuicClientDriver {
    /// The driver of the shard `setup` names.
    pub fn new(connector: Arc<QuicConnector>, setup: DriverSetup) -> Self {
        let endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
        Self {
            endpoint,
            connector,
            setup,
            links: Links::default(),
        }
    }

    /// Connections held (for tests).
    pub fn connection_count(&self) -> usize {
        self.links.conns.len()
    }

    fn receive(&mut self, io: &mut DriverIo<'_>, peer: SocketAddr, packet: Bytes) {
        let data = BytesMut::from(&packet[..]);
        let buf = &mut self.links.buf;
        buf.clear();
        let event = self.endpoint.handle(io.now(), peer, None, None, data, buf);
        match event {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(conn) = self.links.conns.get_mut(&handle) {
                    conn.quic.handle_event(event);
                    self.drive(io, handle);
                }
            }
            // A client endpoint has no server config: nothing to accept.
            Some(DatagramEvent::NewConnection(incoming)) => self.endpoint.ignore(incoming),
            Some(DatagramEvent::Response(transmit)) => send(io, &transmit, &self.links.buf),
            None => {}
        }
    }

    /// Runs `handle`'s connection until it has nothing more to do now: endpoint events, the
    /// stream's bytes in and out, packets to send, its next deadline.
    fn drive(&mut self, io: &mut DriverIo<'_>, handle: ConnectionHandle) {
        self.links.endpoint_events(&mut self.endpoint, handle);
        let Some(conn) = self.links.conns.get_mut(&handle) else {
            return;
        };
        let stepped = conn.step(io);
        if let Some(conn_id) = stepped.released {
            self.links.unmap(conn_id, handle);
        }
        if stepped.drained {
            self.links.remove(handle);
            return;
        }
        self.links.transmit(io, handle, self.setup.gso);
        self.links.reschedule(handle);
    }

    fn with_conn(
        &mut self,
        io: &mut DriverIo<'_>,
        conn_id: ConnId,
        act: impl FnOnce(&mut ClientConn, &mut DriverIo<'_>),
    ) {
        if let Some(handle) = self.links.with_conn(io, conn_id, act) {
            self.drive(io, handle);
            self.links.update_deadline(io);
        }
    }
}

impl DatagramDriver for QuicClientDriver {
    fn on_connect(&mut self, io: &mut DriverIo<'_>, conn: ConnId, peer: SocketAddr) {
        let name = self.connector.name_for(peer);
        let config = self.connector.config.clone();
        match self.endpoint.connect(io.now(), config, peer, &name) {
            Ok((handle, quic)) => {
                self.links.conns.insert(handle, ClientConn::new(quic, conn));
                self.links.handles.insert(conn, handle);
                self.drive(io, handle);
                self.links.update_deadline(io);
            }
            Err(error) => {
                let refused = io::Error::new(io::ErrorKind::InvalidInput, error.to_string());
                io.connected(conn, Err(refused));
            }
        }
    }

    fn on_datagram(&mut self, io: &mut DriverIo<'_>, datagram: Datagram) {
        for packet in datagram.segments() {
            self.receive(io, datagram.peer, packet);
        }
        self.links.update_deadline(io);
    }

    fn on_timeout(&mut self, io: &mut DriverIo<'_>) {
        while let Some(handle) = self.links.expire(io.now()) {
            self.drive(io, handle);
        }
        self.links.update_deadline(io);
    }

    fn on_send(&mut self, io: &mut DriverIo<'_>, conn: ConnId, frames: &[Bytes]) {
        self.with_conn(io, conn, |quic, io| quic.queue(io, conn, frames));
    }

    fn on_finish(&mut self, io: &mut DriverIo<'_>, conn: ConnId) {
        self.with_conn(io, conn, |quic, _| quic.finish_when_sent());
    }

    fn on_read_paused(&mut self, io: &mut DriverIo<'_>, conn: ConnId, paused: bool) {
        self.with_conn(io, conn, |quic, _| quic.paused = paused);
    }

    fn on_close(&mut self, io: &mut DriverIo<'_>, conn: ConnId, how: DriverClose) {
        let handle = self.links.handles.get(&conn).copied();
        self.with_conn(io, conn, |quic, io| quic.close(io, how));
        if let (DriverClose::Abort, Some(handle)) = (how, handle) {
            self.links.unmap(conn, handle);
        }
    }
}
