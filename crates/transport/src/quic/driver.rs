//! [`QuicDriver`]: one shard's QUIC endpoint behind ring-runtime's datagram seam
//! ([`DatagramDriver`]). The runtime hands it the datagrams of the shard's UDP socket; it runs
//! quinn-proto's endpoint and connections, opens a virtual connection once a client's MQTT
//! stream (its first bidirectional stream) opens, and passes the stream's bytes both ways, so
//! the broker sees MQTT bytes as from any transport.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use quinn_proto::{ConnectionHandle, DatagramEvent, Endpoint, Transmit};
use ring_runtime::{ConnId, Datagram, DatagramDriver, DriverClose, DriverIo, DriverSetup, ShardId};

use super::cid::owner_shard;
use super::config::QuicListenerConfig;
use super::conn::QuicConn;
use super::counters::QuicCounters;

/// The most datagrams one transmit may join into a GSO train.
const MAX_TRAIN: usize = 10;

/// One shard's QUIC endpoint and its connections.
pub struct QuicDriver {
    endpoint: Endpoint,
    config: QuicListenerConfig,
    setup: DriverSetup,
    conns: HashMap<ConnectionHandle, QuicConn>,
    /// The QUIC connection of each virtual connection.
    handles: HashMap<ConnId, ConnectionHandle>,
    /// Each connection's next deadline, soonest first.
    deadlines: BTreeSet<(Instant, ConnectionHandle)>,
    /// Scratch space for outgoing packets.
    buf: Vec<u8>,
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
            conns: HashMap::new(),
            handles: HashMap::new(),
            deadlines: BTreeSet::new(),
            buf: Vec::new(),
        }
    }

    /// Connections held (for tests and metrics).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    fn receive(&mut self, io: &mut DriverIo<'_>, datagram: &Datagram, packet: Bytes) {
        let local_ip = Some(datagram.local.ip());
        let data = BytesMut::from(&packet[..]);
        self.buf.clear();
        let event =
            self.endpoint
                .handle(io.now(), datagram.peer, local_ip, None, data, &mut self.buf);
        match event {
            Some(DatagramEvent::ConnectionEvent(handle, event)) => {
                if let Some(conn) = self.conns.get_mut(&handle) {
                    conn.quic.handle_event(event);
                    self.drive(io, handle);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => self.accept(io, incoming),
            Some(DatagramEvent::Response(transmit)) => self.send_buffered(io, &transmit),
            None => {}
        }
    }

    fn accept(&mut self, io: &mut DriverIo<'_>, incoming: quinn_proto::Incoming) {
        self.buf.clear();
        let counters = &self.config.counters;
        if self.conns.len() >= self.config.max_connections {
            QuicCounters::add(&counters.refused, 1);
            let transmit = self.endpoint.refuse(incoming, &mut self.buf);
            return self.send_buffered(io, &transmit);
        }
        // The server config now (a reload swaps it for the handshakes after it).
        let server = Some(self.config.current());
        match self
            .endpoint
            .accept(incoming, io.now(), &mut self.buf, server)
        {
            Ok((handle, quic)) => {
                QuicCounters::add(&counters.connections, 1);
                let identity = self.config.identity_as_username;
                self.conns.insert(handle, QuicConn::new(quic, identity));
                self.drive(io, handle);
            }
            Err(refused) => {
                QuicCounters::add(&counters.handshake_failures, 1);
                if let Some(transmit) = refused.response {
                    self.send_buffered(io, &transmit);
                }
            }
        }
    }

    /// Runs `handle`'s connection until it has nothing more to do now: endpoint events, the
    /// stream's bytes in and out, packets to send, its next deadline.
    fn drive(&mut self, io: &mut DriverIo<'_>, handle: ConnectionHandle) {
        let Some(conn) = self.conns.get_mut(&handle) else {
            return;
        };
        while let Some(event) = conn.quic.poll_endpoint_events() {
            if let Some(reply) = self.endpoint.handle_event(handle, event) {
                conn.quic.handle_event(reply);
            }
        }
        let stepped = conn.step(io);
        let counters = &self.config.counters;
        if let Some(conn_id) = stepped.opened {
            QuicCounters::add(&counters.streams_opened, 1);
            self.handles.insert(conn_id, handle);
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
            self.unmap(conn_id, handle);
        }
        if stepped.drained {
            return self.forget(handle);
        }
        self.transmit(io, handle);
        self.reschedule(handle);
    }

    /// `conn_id` no longer names `handle`'s connection (the runtime may reuse the id).
    fn unmap(&mut self, conn_id: ConnId, handle: ConnectionHandle) {
        if self.handles.get(&conn_id) == Some(&handle) {
            self.handles.remove(&conn_id);
        }
    }

    fn transmit(&mut self, io: &mut DriverIo<'_>, handle: ConnectionHandle) {
        let Some(conn) = self.conns.get_mut(&handle) else {
            return;
        };
        let now = io.now();
        let max = if self.setup.gso { MAX_TRAIN } else { 1 };
        loop {
            self.buf.clear();
            let Some(transmit) = conn.quic.poll_transmit(now, max, &mut self.buf) else {
                break;
            };
            send(io, &transmit, &self.buf);
        }
    }

    fn send_buffered(&mut self, io: &mut DriverIo<'_>, transmit: &Transmit) {
        send(io, transmit, &self.buf);
    }

    fn reschedule(&mut self, handle: ConnectionHandle) {
        let Some(conn) = self.conns.get_mut(&handle) else {
            return;
        };
        if let Some(old) = conn.deadline.take() {
            self.deadlines.remove(&(old, handle));
        }
        conn.deadline = conn.quic.poll_timeout();
        if let Some(at) = conn.deadline {
            self.deadlines.insert((at, handle));
        }
    }

    /// The connection is drained (its virtual connection already reported closed): its state
    /// goes.
    fn forget(&mut self, handle: ConnectionHandle) {
        let Some(conn) = self.conns.remove(&handle) else {
            return;
        };
        if let Some(at) = conn.deadline {
            self.deadlines.remove(&(at, handle));
        }
        let counters = &self.config.counters;
        let path = conn.quic.stats().path;
        QuicCounters::sub(&counters.connections, 1);
        QuicCounters::add(&counters.lost_packets, path.lost_packets);
        QuicCounters::add(&counters.sent_packets, path.sent_packets);
    }

    fn update_deadline(&self, io: &mut DriverIo<'_>) {
        io.set_deadline(self.deadlines.first().map(|(at, _)| *at));
    }

    fn with_conn(
        &mut self,
        io: &mut DriverIo<'_>,
        conn_id: ConnId,
        act: impl FnOnce(&mut QuicConn, &mut DriverIo<'_>),
    ) {
        let Some(&handle) = self.handles.get(&conn_id) else {
            return;
        };
        if let Some(conn) = self.conns.get_mut(&handle) {
            act(conn, io);
        }
        self.drive(io, handle);
        self.update_deadline(io);
    }
}

/// Queues `transmit`'s packets (in `buf`) on the shard's socket.
fn send(io: &mut DriverIo<'_>, transmit: &Transmit, buf: &[u8]) {
    let data = Bytes::copy_from_slice(&buf[..transmit.size]);
    match transmit.segment_size {
        Some(segment) if segment < transmit.size => {
            let segment = u16::try_from(segment).unwrap_or(u16::MAX);
            io.send_segments(transmit.destination, data, segment);
        }
        _ => {
            io.send(transmit.destination, data);
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
        self.update_deadline(io);
    }

    fn on_timeout(&mut self, io: &mut DriverIo<'_>) {
        let now = io.now();
        while let Some(&(at, handle)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.remove(&(at, handle));
            if let Some(conn) = self.conns.get_mut(&handle) {
                conn.deadline = None;
                conn.quic.handle_timeout(now);
            }
            self.drive(io, handle);
        }
        self.update_deadline(io);
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
        let handle = self.handles.get(&conn).copied();
        self.with_conn(io, conn, |quic, io| quic.close(io, how));
        if let (DriverClose::Abort, Some(handle)) = (how, handle) {
            self.unmap(conn, handle);
        }
    }
}
