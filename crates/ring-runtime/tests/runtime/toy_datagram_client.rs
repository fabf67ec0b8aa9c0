//! The client side of the toy datagram protocol (`toy_datagram.rs`), for outbound virtual
//! connections: a driver on a client endpoint that connects with `N token`, takes the
//! server's `I shard id` as the end of the handshake, then carries stream bytes both ways;
//! and a handler that connects when the test posts it a target and reports what it sees.
//!
//! The toy server names no connection in its datagrams, so the client driver tells its
//! connections apart by the server's address: it refuses a second connection to an address
//! it is already connected to (`AddrInUse`), the refusal the tests look for. A handshake
//! that gets no answer within [`ToyClientDriver`]'s timeout fails with `TimedOut`.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use ring_runtime::{
    CloseReason, ConnId, Datagram, DatagramDriver, DriverClose, DriverIo, DriverSetup, Handler,
    ShardCtx,
};

use crate::toy_datagram::CHUNK;

/// How long the client driver waits for the server's `I`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(300);

/// One outbound connection of the client driver.
struct Outbound {
    conn: ConnId,
    /// The server's `I` answer (shard, id) once the handshake is done.
    named: Option<(u8, u16)>,
    /// When the handshake gives up.
    give_up: Instant,
}

/// The toy protocol's client driver for one shard's client endpoint.
pub struct ToyClientDriver {
    shard: u16,
    next_token: u16,
    by_peer: HashMap<SocketAddr, Outbound>,
    peers: HashMap<ConnId, SocketAddr>,
}

impl ToyClientDriver {
    pub fn factory() -> ring_runtime::DriverFactory {
        Arc::new(|setup: DriverSetup| {
            Box::new(ToyClientDriver {
                shard: u16::try_from(setup.shard.index()).unwrap(),
                next_token: 0,
                by_peer: HashMap::new(),
                peers: HashMap::new(),
            }) as Box<dyn DatagramDriver>
        })
    }

    /// A token no other shard's driver uses.
    fn token(&mut self) -> u32 {
        self.next_token += 1;
        (u32::from(self.shard) << 16) | u32::from(self.next_token)
    }

    /// The earliest handshake deadline, for the endpoint's one timer.
    fn rearm(&self, io: &mut DriverIo<'_>) {
        let pending = self.by_peer.values().filter(|out| out.named.is_none());
        io.set_deadline(pending.map(|out| out.give_up).min());
    }

    fn forget(&mut self, conn: ConnId) -> Option<(SocketAddr, Outbound)> {
        let peer = self.peers.remove(&conn)?;
        self.by_peer.remove(&peer).map(|out| (peer, out))
    }

    fn named(&mut self, io: &mut DriverIo<'_>, peer: SocketAddr, data: &[u8]) {
        let Some(out) = self.by_peer.get_mut(&peer) else {
            return;
        };
        if out.named.is_none() && data.len() >= 4 {
            out.named = Some((data[1], u16::from_be_bytes([data[2], data[3]])));
            io.connected(out.conn, Ok(()));
            self.rearm(io);
        }
    }
}

impl DatagramDriver for ToyClientDriver {
    fn on_connect(&mut self, io: &mut DriverIo<'_>, conn: ConnId, peer: SocketAddr) {
        if self.by_peer.contains_key(&peer) {
            io.connected(conn, Err(io::ErrorKind::AddrInUse.into()));
            return;
        }
        let mut open = vec![b'N'];
        open.extend_from_slice(&self.token().to_be_bytes());
        io.send(peer, Bytes::from(open));
        let give_up = io.now() + HANDSHAKE_TIMEOUT;
        let out = Outbound {
            conn,
            named: None,
            give_up,
        };
        self.by_peer.insert(peer, out);
        self.peers.insert(conn, peer);
        self.rearm(io);
    }

    fn on_datagram(&mut self, io: &mut DriverIo<'_>, datagram: Datagram) {
        let peer = datagram.peer;
        for data in datagram.segments() {
            let Some(conn) = self.by_peer.get(&peer).map(|out| out.conn) else {
                return;
            };
            match data.first() {
                Some(b'I') => self.named(io, peer, &data),
                Some(b'D') => io.deliver(conn, data.slice(1..)),
                Some(b'F') => io.finished(conn),
                Some(b'C') => {
                    self.forget(conn);
                    io.closed(conn, CloseReason::PeerClosed);
                }
                _ => {}
            }
        }
    }

    fn on_timeout(&mut self, io: &mut DriverIo<'_>) {
        let now = io.now();
        let expired: Vec<ConnId> = self
            .by_peer
            .values()
            .filter(|out| out.named.is_none() && out.give_up <= now)
            .map(|out| out.conn)
            .collect();
        for conn in expired {
            self.forget(conn);
            io.connected(conn, Err(io::ErrorKind::TimedOut.into()));
        }
        self.rearm(io);
    }

    fn on_send(&mut self, io: &mut DriverIo<'_>, conn: ConnId, frames: &[Bytes]) {
        let Some(&peer) = self.peers.get(&conn) else {
            return;
        };
        let Some((shard, id)) = self.by_peer.get(&peer).and_then(|out| out.named) else {
            return;
        };
        let stream: Vec<u8> = frames.iter().flat_map(|f| f.iter().copied()).collect();
        for chunk in stream.chunks(CHUNK) {
            let mut datagram = BytesMut::with_capacity(chunk.len() + 4);
            datagram.put_u8(b'D');
            datagram.put_u8(shard);
            datagram.put_u16(id);
            datagram.put_slice(chunk);
            io.send(peer, datagram.freeze());
        }
    }

    fn on_close(&mut self, io: &mut DriverIo<'_>, conn: ConnId, how: DriverClose) {
        let Some((peer, out)) = self.forget(conn) else {
            return;
        };
        if let Some((shard, id)) = out.named {
            let [high, low] = id.to_be_bytes();
            io.send(peer, Bytes::from(vec![b'C', shard, high, low]));
        }
        if how == DriverClose::Graceful {
            io.closed(conn, CloseReason::Local);
        }
    }
}

/// What the dialing handler saw, in order.
#[derive(Debug)]
pub enum Seen {
    /// `connect_datagram` gave this id.
    Asked(ConnId),
    /// `connect_datagram` itself failed.
    Refused(io::ErrorKind),
    /// `on_connected`, with the connection's local address when it succeeded.
    Connected(ConnId, Result<SocketAddr, io::ErrorKind>),
    Data(ConnId, Vec<u8>),
    Closed(ConnId, CloseReason),
}

/// What the test asks of a dialing shard.
pub enum Dial {
    /// Connect to a peer through an endpoint, then send the payload.
    Connect {
        endpoint: usize,
        peer: SocketAddr,
        payload: &'static [u8],
    },
    /// Close a connection gracefully.
    Close(ConnId),
    /// Connect, and close in the same turn.
    ConnectAndClose { endpoint: usize, peer: SocketAddr },
}

/// Connects when told to, queues the asked payload at once (it waits for the connect),
/// reports everything.
pub struct ToyDialer {
    pub seen: Sender<Seen>,
}

impl ToyDialer {
    fn report(&self, seen: Seen) {
        // The test may have stopped listening after its last check.
        let _ = self.seen.send(seen);
    }
}

impl Handler for ToyDialer {
    type Message = Dial;

    fn on_accept(&mut self, _ctx: &mut ShardCtx<Dial>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_messages(&mut self, ctx: &mut ShardCtx<Dial>, messages: Vec<Dial>) {
        for message in messages {
            match message {
                Dial::Connect {
                    endpoint,
                    peer,
                    payload,
                } => match ctx.connect_datagram(endpoint, peer) {
                    Ok(conn) => {
                        if !payload.is_empty() {
                            ctx.send(conn, Bytes::from_static(payload)).unwrap();
                        }
                        self.report(Seen::Asked(conn));
                    }
                    Err(ring_runtime::RuntimeError::Connect { source, .. }) => {
                        self.report(Seen::Refused(source.kind()));
                    }
                    Err(other) => panic!("unexpected error: {other}"),
                },
                Dial::Close(conn) => ctx.close(conn),
                Dial::ConnectAndClose { endpoint, peer } => {
                    let conn = ctx.connect_datagram(endpoint, peer).unwrap();
                    ctx.close(conn);
                    self.report(Seen::Asked(conn));
                }
            }
        }
    }

    fn on_connected(&mut self, ctx: &mut ShardCtx<Dial>, conn: ConnId, result: io::Result<()>) {
        let outcome = match result {
            Ok(()) => Ok(ctx.local_addr(conn).unwrap()),
            Err(error) => Err(error.kind()),
        };
        self.report(Seen::Connected(conn, outcome));
    }

    fn on_data(&mut self, _ctx: &mut ShardCtx<Dial>, conn: ConnId, data: Bytes) {
        self.report(Seen::Data(conn, data.to_vec()));
    }

    fn on_closed(&mut self, _ctx: &mut ShardCtx<Dial>, conn: ConnId, reason: CloseReason) {
        self.report(Seen::Closed(conn, reason));
    }
}
