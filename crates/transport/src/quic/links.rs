//! [`Links`]: the connections of one shard's QUIC endpoint, server's ([`super::QuicDriver`])
//! or client's ([`super::QuicClientDriver`]): each by quinn-proto's handle and by its virtual
//! connection, their deadlines soonest first, and what moves their packets to the shard's
//! socket.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use bytes::Bytes;
use quinn_proto::{Connection, ConnectionHandle, Endpoint, Transmit};
use ring_runtime::{ConnId, DriverIo};

/// The most datagrams one transmit may join into a GSO train.
const MAX_TRAIN: usize = 10;

/// A connection a [`Links`] table holds: quinn-proto's state and its deadline as scheduled.
pub(super) trait QuicLink {
    fn quic(&mut self) -> &mut Connection;
    /// The deadline the table has this connection under.
    fn scheduled(&mut self) -> &mut Option<Instant>;
}

/// One endpoint's connections.
pub(super) struct Links<C> {
    pub(super) conns: HashMap<ConnectionHandle, C>,
    /// The QUIC connection of each virtual connection.
    pub(super) handles: HashMap<ConnId, ConnectionHandle>,
    /// Each connection's next deadline, soonest first.
    deadlines: BTreeSet<(Instant, ConnectionHandle)>,
    /// Scratch space for outgoing packets.
    pub(super) buf: Vec<u8>,
}

impl<C> Default for Links<C> {
    fn default() -> Self {
        Self {
            conns: HashMap::new(),
            handles: HashMap::new(),
            deadlines: BTreeSet::new(),
            buf: Vec::new(),
        }
    }
}

impl<C: QuicLink> Links<C> {
    /// Passes `handle`'s events for the endpoint to it, and its answers back.
    pub(super) fn endpoint_events(&mut self, endpoint: &mut Endpoint, handle: ConnectionHandle) {
        let Some(conn) = self.conns.get_mut(&handle) else {
            return;
        };
        let quic = conn.quic();
        while let Some(event) = quic.poll_endpoint_events() {
            if let Some(reply) = endpoint.handle_event(handle, event) {
                quic.handle_event(reply);
            }
        }
    }

    /// Queues the packets `handle`'s connection has to send now (GSO trains where `gso`).
    pub(super) fn transmit(&mut self, io: &mut DriverIo<'_>, handle: ConnectionHandle, gso: bool) {
        let Some(conn) = self.conns.get_mut(&handle) else {
            return;
        };
        let now = io.now();
        let max = if gso { MAX_TRAIN } else { 1 };
        loop {
            self.buf.clear();
            let Some(transmit) = conn.quic().poll_transmit(now, max, &mut self.buf) else {
                break;
            };
            send(io, &transmit, &self.buf);
        }
    }

    /// Schedules `handle`'s connection at its next deadline.
    pub(super) fn reschedule(&mut self, handle: ConnectionHandle) {
        let Some(conn) = self.conns.get_mut(&handle) else {
            return;
        };
        if let Some(old) = conn.scheduled().take() {
            self.deadlines.remove(&(old, handle));
        }
        let next = conn.quic().poll_timeout();
        *conn.scheduled() = next;
        if let Some(at) = next {
            self.deadlines.insert((at, handle));
        }
    }

    /// The next connection whose deadline passed by `now`, told of it; `None` when none is due.
    pub(super) fn expire(&mut self, now: Instant) -> Option<ConnectionHandle> {
        let &(at, handle) = self.deadlines.first().filter(|(at, _)| *at <= now)?;
        self.deadlines.remove(&(at, handle));
        if let Some(conn) = self.conns.get_mut(&handle) {
            *conn.scheduled() = None;
            conn.quic().handle_timeout(now);
        }
        Some(handle)
    }

    /// `conn_id` no longer names `handle`'s connection (the runtime may reuse the id).
    pub(super) fn unmap(&mut self, conn_id: ConnId, handle: ConnectionHandle) {
        if self.handles.get(&conn_id) == Some(&handle) {
            self.handles.remove(&conn_id);
        }
    }

    /// Takes a drained connection out, deadline and all.
    pub(super) fn remove(&mut self, handle: ConnectionHandle) -> Option<C> {
        let mut conn = self.conns.remove(&handle)?;
        if let Some(at) = *conn.scheduled() {
            self.deadlines.remove(&(at, handle));
        }
        Some(conn)
    }

    /// Tells the runtime when the soonest connection deadline is.
    pub(super) fn update_deadline(&self, io: &mut DriverIo<'_>) {
        io.set_deadline(self.deadlines.first().map(|(at, _)| *at));
    }

    /// Runs `act` on `conn_id`'s connection; the handle to drive after it, if it has one.
    pub(super) fn with_conn(
        &mut self,
        io: &mut DriverIo<'_>,
        conn_id: ConnId,
        act: impl FnOnce(&mut C, &mut DriverIo<'_>),
    ) -> Option<ConnectionHandle> {
        let handle = *self.handles.get(&conn_id)?;
        if let Some(conn) = self.conns.get_mut(&handle) {
            act(conn, io);
        }
        Some(handle)
    }
}

/// Queues `transmit`'s packets (in `buf`) on the shard's socket.
pub(super) fn send(io: &mut DriverIo<'_>, transmit: &Transmit, buf: &[u8]) {
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
