//! [`QuicDriver`]: one shard's QUIC endpoint behind ring-runtime's datagram seam
//! ([`DatagramDriver`]). The runtime hands it the datagrams of the shard's UDP socket; it runs
//! quinn-proto's endpoint and connections, opens a virtual connection once a client's MQTT
//! stream (its first bidirectional stream) opens, and passes the stream's bytes both ways, so
//! the broker sees MQTT bytes as from any transport.

use bytes::{Bytes, BytesMut};
use quinn_proto::{ConnectionHandle, DatagramEvent, Endpoint};
use ring_runtime::{ConnId, Datagram, DatagramDriver, DriverClose, DriverIo, DriverSetup, ShardId};

use super::cid::owner_shard;
use super::config::QuicListenerConfig;
use super::conn::QuicConn;
use super::counters::QuicCounters;
use super::links::{Links, send};

/// One shard's QUIC endpoint and its connections.
pub struct QuicDriver {
    endpoint: Endpoint,
    config: QuicListenerConfig,
    setup: DriverSetup,
    links: Links<QuicConn>,
}

impl QuicDriver {
    /// The driver of the shard `setup` names.
    pub fn new(config: QuicListenerConfig, setup: DriverSetup) -> Self {
        let endpoint = Endpoint::new(
            QuicListenerConfig::endpoint(setup.shard.index()),
            Some(config.current()),
            true,
            None,
        );
        Self {
            endpoint,
            config,
            setup,
            links: Links::default(),
        }
    }

    /// Connections held (for tests and metrics).
    pub fn connection_count(&self) -> usize {
        self.links.conns.len()
    }

    fn receive(&mut self, io: &mut DriverIo<'_>, datagram: &Datagram, packet: Bytes) {
        let local_ip = Some(datagram.local.ip());
        let data = BytesMut::from(&packet[..]);
        let buf = &mut self.links.buf;
        buf.clear();
        let event = (self.endpoint).handle(io.now(), datagram.peer, local_ip, None, data, buf);
        match event {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(conn) = self.links.conns.get_mut(&handle) {
                    conn.quic.handle_event(event);
                    self.drive(io, handle);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => self.accept(io, incoming),
            Some(DatagramEvent::Response(transmit)) => send(io, &transmit, &self.links.buf),
            None => {}
        }
    }

    fn accept(&mut self, io: &mut DriverIo<'_>, incoming: quinn_proto::Incoming) {
        let buf = &mut self.links.buf;
        buf.clear();
        let counters = &self.config.counters;
        if self.links.conns.len() >= self.config.max_connections {
            QuicCounters::add(&counters.refused, 1);
            let transmit = self.endpoint.refuse(incoming, buf);
            return send(io, &transmit, buf);
        }
        // The server config now (a reload swaps it for the handshakes after it).
        let server = Some(self.config.current());
        match self.endpoint.accept(incoming, io.now(), buf, server) {
            Ok((handle, quic)) => {
                QuicCounters::add(&counters.connections, 1);
                let identity = self.config.identity_as_username;
                self.links
                    .conns
                    .insert(handle, QuicConn::new(quic, identity));
                self.drive(io, handle);
            }
            Err(refused) => {
                QuicCounters::add(&counters.handshake_failures, 1);
                if let Some(transmit) = refused.response {
                    send(io, &transmit, &self.links.buf);
                }
            }
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
        let counters = &self.config.counters;
        if let Some(conn_id) = stepped.opened {
            QuicCounters::add(&counters.streams_opened, 1);
            self.links.handles.insert(conn_id, handle);
        }
        if stepped.opened_early {
            QuicCounters::add(&counters.zero_rtt_accepted, 1);
        }
        if stepped.early_waited {
            QuicCounters::add(&counters.early_data_waited, 1);
        }
        if stepped.migrated {
            QuicCounters::add(&counters.migrations, 1);
        }
        if let Some(conn_id) = stepped.released {
            self.links.unmap(conn_id, handle);
        }
        if stepped.drained {
            return self.forget(handle);
        }
        self.links.transmit(io, handle, self.setup.gso);
        self.links.reschedule(handle);
    }

    /// The connection is drained (its virtual connection already reported closed): its state
    /// goes, its packet counts into the counters.
    fn forget(&mut self, handle: ConnectionHandle) {
        let Some(conn) = self.links.remove(handle) else {
            return;
        };
        let counters = &self.config.counters;
        let path = conn.quic.stats().path;
        QuicCounters::sub(&counters.connections, 1);
        QuicCounters::add(&counters.lost_packets, path.lost_packets);
        QuicCounters::add(&counters.sent_packets, path.sent_packets);
    }

    fn with_conn(
        &mut self,
        io: &mut DriverIo<'_>,
        conn_id: ConnId,
        act: impl FnOnce(&mut QuicConn, &mut DriverIo<'_>),
    ) {
        if let Some(handle) = self.links.with_conn(io, conn_id, act) {
            self.drive(io, handle);
            self.links.update_deadline(io);
        }
    }
}

impl DatagramDriver for QuicDriver {
    fn on_datagram(&mut self, io: &mut DriverIo<'_>, datagram: Datagram) {
        let here = io.shard().index();
        for packet in datagram.segments() {
            match owner_shard(&packet, io.shard_count()) {
                Some(owner) if owner != here => {
                    let shard = ShardId::new(owner as u16);
                    let forwarded = Datagram {
                        data: packet,
                        segment_size: None,
                        ..datagram.clone()
                    };
                    io.forward(shard, forwarded);
                }
                _ => self.receive(io, &datagram, packet),
            }
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
