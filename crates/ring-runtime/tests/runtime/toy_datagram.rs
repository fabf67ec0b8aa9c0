//! A toy datagram protocol for the datagram endpoint tests: the driver, an echo handler with
//! a few commands, and a blocking client.
//!
//! Client to server: `N token(4) payload` opens a connection (the shard that receives it owns
//! it), `D shard id(2) payload` carries stream bytes, `C shard id(2)` closes. Server to client:
//! `I shard id(2)` names the connection, `D payload` stream bytes (a GSO train of them for long
//! sends), `F` the end of the server's stream, `C` closed. The shard byte names the owner: a
//! datagram that the kernel's `SO_REUSEPORT` hash hands to another shard (the client changed
//! its port) is forwarded to it.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use ring_runtime::{
    CloseReason, ConnId, Datagram, DatagramDriver, DriverClose, DriverIo, DriverSetup, Handler,
    ShardCtx, ShardId,
};

use crate::common::HANG;

/// Stream bytes per server datagram (a GSO segment is this plus the kind byte).
pub const CHUNK: usize = 1000;

/// What drivers and handlers saw, for the tests to check (shared by every shard), and the
/// gate a `block` command waits on.
#[derive(Clone, Default)]
pub struct Log {
    lines: Arc<Mutex<Vec<String>>>,
    gate_open: Arc<AtomicBool>,
}

impl Log {
    pub fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
    }

    pub fn contains(&self, line: &str) -> bool {
        self.lines.lock().unwrap().iter().any(|l| l == line)
    }

    pub fn count_prefix(&self, prefix: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with(prefix))
            .count()
    }

    /// Lets a handler blocked by `block` go on.
    pub fn open_gate(&self) {
        self.gate_open.store(true, Ordering::Release);
    }

    /// Blocks the calling shard until [`Self::open_gate`] (bounded by the hang limit).
    fn wait_for_gate(&self) {
        crate::common::wait_until("the test opens the gate", || {
            self.gate_open.load(Ordering::Acquire)
        });
    }
}

/// One connection of the toy driver.
struct ToyConn {
    conn: ConnId,
    peer: SocketAddr,
    paused: bool,
    /// Bytes kept while the handler pauses reading (a QUIC driver would stop granting credit).
    held: Vec<Bytes>,
}

/// The toy protocol's driver for one shard.
pub struct ToyDriver {
    shard: u8,
    next_id: u16,
    conns: HashMap<u16, ToyConn>,
    ids: HashMap<ConnId, u16>,
    tokens: HashMap<u32, u16>,
    log: Log,
}

impl ToyDriver {
    pub fn factory(log: Log) -> ring_runtime::DriverFactory {
        Arc::new(move |setup: DriverSetup| {
            log.push(format!("gso {}", setup.gso));
            Box::new(ToyDriver {
                shard: u8::try_from(setup.shard.index()).unwrap(),
                next_id: 0,
                conns: HashMap::new(),
                ids: HashMap::new(),
                tokens: HashMap::new(),
                log: log.clone(),
            }) as Box<dyn DatagramDriver>
        })
    }

    fn open(&mut self, io: &mut DriverIo<'_>, peer: SocketAddr, token: u32, payload: Bytes) {
        let id = match self.tokens.get(&token) {
            Some(&id) => id,
            None => {
                let id = self.next_id;
                self.next_id += 1;
                let Some(conn) = io.open(peer) else {
                    self.log.push(format!("refused {peer}"));
                    return;
                };
                let toy = ToyConn {
                    conn,
                    peer,
                    paused: false,
                    held: Vec::new(),
                };
                self.conns.insert(id, toy);
                self.ids.insert(conn, id);
                self.tokens.insert(token, id);
                // A deadline, to see timer expiries reach the driver.
                io.set_deadline(Some(io.now() + Duration::from_millis(1)));
                id
            }
        };
        let [high, low] = id.to_be_bytes();
        io.send(peer, Bytes::from(vec![b'I', self.shard, high, low]));
        self.stream_bytes(io, id, peer, payload);
    }

    fn stream_bytes(&mut self, io: &mut DriverIo<'_>, id: u16, peer: SocketAddr, data: Bytes) {
        let Some(toy) = self.conns.get_mut(&id) else {
            return;
        };
        if toy.peer != peer {
            self.log.push(format!("moved {} -> {peer}", toy.peer));
            toy.peer = peer;
            io.set_peer(toy.conn, peer);
        }
        if data.is_empty() {
            return;
        }
        if toy.paused {
            toy.held.push(data);
        } else {
            io.deliver(toy.conn, data);
        }
    }

    fn peer_closed(&mut self, io: &mut DriverIo<'_>, id: u16) {
        if let Some(toy) = self.conns.remove(&id) {
            self.ids.remove(&toy.conn);
            io.closed(toy.conn, CloseReason::PeerClosed);
        }
    }
}

impl DatagramDriver for ToyDriver {
    fn on_datagram(&mut self, io: &mut DriverIo<'_>, datagram: Datagram) {
        for data in datagram.segments() {
            let peer = datagram.peer;
            match data.first() {
                Some(b'N') if data.len() >= 5 => {
                    let token = u32::from_be_bytes(data[1..5].try_into().unwrap());
                    self.open(io, peer, token, data.slice(5..));
                }
                Some(&kind @ (b'D' | b'C')) if data.len() >= 4 => {
                    let owner = data[1];
                    if owner != self.shard {
                        let forwarded = Datagram {
                            data,
                            segment_size: None,
                            ..datagram.clone()
                        };
                        if !io.forward(ShardId::new(u16::from(owner)), forwarded) {
                            self.log.push("forward refused".to_owned());
                        }
                        continue;
                    }
                    let id = u16::from_be_bytes([data[2], data[3]]);
                    if kind == b'D' {
                        self.stream_bytes(io, id, peer, data.slice(4..));
                    } else {
                        self.peer_closed(io, id);
                    }
                }
                _ => self.log.push(format!("malformed datagram from {peer}")),
            }
        }
    }

    fn on_timeout(&mut self, io: &mut DriverIo<'_>) {
        self.log
            .push(format!("timeout on shard {}", io.shard().index()));
    }

    fn on_send(&mut self, io: &mut DriverIo<'_>, conn: ConnId, frames: &[Bytes]) {
        let Some(toy) = self.ids.get(&conn).and_then(|id| self.conns.get(id)) else {
            return;
        };
        let stream: Vec<u8> = frames.iter().flat_map(|f| f.iter().copied()).collect();
        let mut train = BytesMut::new();
        for chunk in stream.chunks(CHUNK) {
            train.put_u8(b'D');
            train.put_slice(chunk);
        }
        let segment = u16::try_from(CHUNK + 1).unwrap();
        io.send_segments(toy.peer, train.freeze(), segment);
    }

    fn on_finish(&mut self, io: &mut DriverIo<'_>, conn: ConnId) {
        if let Some(toy) = self.ids.get(&conn).and_then(|id| self.conns.get(id)) {
            io.send(toy.peer, Bytes::from_static(b"F"));
        }
    }

    fn on_read_paused(&mut self, io: &mut DriverIo<'_>, conn: ConnId, paused: bool) {
        self.log.push(format!("paused {paused}"));
        let Some(toy) = self.ids.get(&conn).and_then(|id| self.conns.get_mut(id)) else {
            return;
        };
        toy.paused = paused;
        if !paused {
            for data in std::mem::take(&mut toy.held) {
                io.deliver(conn, data);
            }
        }
    }

    fn on_close(&mut self, io: &mut DriverIo<'_>, conn: ConnId, how: DriverClose) {
        let Some(id) = self.ids.remove(&conn) else {
            return;
        };
        if let Some(toy) = self.conns.remove(&id) {
            io.send(toy.peer, Bytes::from_static(b"C"));
        }
        self.log.push(format!("driver close {how:?}"));
        if how == DriverClose::Graceful {
            io.closed(conn, CloseReason::Local);
        }
    }
}

/// Echoes stream bytes, with a few commands: `pause` (pauses reading until a message with the
/// connection id arrives), `peer?`, `conn?`, `block` (holds the shard's thread until the test
/// opens the log's gate), `bye` (answers, then closes), `kill` (queues an answer, then aborts), `half` (answers, then shuts writing down), `big` (5000 bytes), `flood`
/// (32 frames of 1000 bytes).
pub struct ToyEcho {
    pub log: Log,
}

impl Handler for ToyEcho {
    type Message = ConnId;

    fn on_accept(&mut self, ctx: &mut ShardCtx<ConnId>, conn: ConnId, _peer: SocketAddr) {
        let local = ctx.local_addr(conn).unwrap();
        self.log.push(format!("accept on {local}"));
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<ConnId>, conn: ConnId, data: Bytes) {
        let reply = match &data[..] {
            b"pause" => {
                ctx.pause_reading(conn);
                Bytes::from_static(b"paused")
            }
            b"peer?" => Bytes::from(ctx.peer_addr(conn).unwrap().to_string()),
            b"conn?" => Bytes::from(conn.to_u64().to_string()),
            b"big" => Bytes::from(crate::common::pattern(7, 5000)),
            b"flood" => {
                for _ in 0..32 {
                    ctx.send(conn, Bytes::from(vec![b'f'; CHUNK])).unwrap();
                }
                return;
            }
            b"bye" => {
                ctx.send(conn, Bytes::from_static(b"bye!")).unwrap();
                ctx.close(conn);
                return;
            }
            b"block" => {
                self.log.push("blocked".to_owned());
                self.log.wait_for_gate();
                Bytes::from_static(b"unblocked")
            }
            b"kill" => {
                ctx.send(conn, Bytes::from_static(b"never sent")).unwrap();
                ctx.abort(conn);
                return;
            }
            b"half" => {
                ctx.send(conn, Bytes::from_static(b"last")).unwrap();
                ctx.shutdown_write(conn);
                return;
            }
            _ => data,
        };
        if ctx.send(conn, reply.clone()).is_err() {
            // Writing was shut down: reading goes on.
            let text = String::from_utf8_lossy(&reply);
            self.log.push(format!("read after shutdown_write: {text}"));
        }
    }

    fn on_closed(&mut self, _ctx: &mut ShardCtx<ConnId>, _conn: ConnId, reason: CloseReason) {
        self.log.push(format!("closed {reason:?}"));
    }

    fn on_messages(&mut self, ctx: &mut ShardCtx<ConnId>, messages: Vec<ConnId>) {
        for conn in messages {
            ctx.resume_reading(conn);
        }
    }
}

/// A client of the toy protocol on its own UDP socket.
pub struct ToyClient {
    pub socket: UdpSocket,
    server: SocketAddr,
    pub shard: u8,
    id: u16,
}

impl ToyClient {
    /// Opens a connection with `token`, sending `payload` with the open.
    pub fn open(server: SocketAddr, token: u32) -> Self {
        let socket = bound_socket(server);
        let mut open = vec![b'N'];
        open.extend_from_slice(&token.to_be_bytes());
        socket.send_to(&open, server).unwrap();
        let reply = receive(&socket);
        assert_eq!(reply[0], b'I', "the server names the connection first");
        Self {
            socket,
            server,
            shard: reply[1],
            id: u16::from_be_bytes([reply[2], reply[3]]),
        }
    }

    /// Moves to a new socket (a new source port): an address change.
    pub fn rebind(&mut self) {
        self.socket = bound_socket(self.server);
    }

    fn header(&self, kind: u8) -> Vec<u8> {
        let [high, low] = self.id.to_be_bytes();
        vec![kind, self.shard, high, low]
    }

    pub fn send(&self, payload: &[u8]) {
        let mut datagram = self.header(b'D');
        datagram.extend_from_slice(payload);
        self.socket.send_to(&datagram, self.server).unwrap();
    }

    pub fn close(&self) {
        self.socket
            .send_to(&self.header(b'C'), self.server)
            .unwrap();
    }

    /// The next datagram from the server.
    pub fn receive(&self) -> Vec<u8> {
        receive(&self.socket)
    }

    /// Stream bytes until `len` have come.
    pub fn read_stream(&self, len: usize) -> Vec<u8> {
        let mut stream = Vec::new();
        while stream.len() < len {
            let datagram = self.receive();
            assert_eq!(datagram[0], b'D', "stream bytes expected, got {datagram:?}");
            stream.extend_from_slice(&datagram[1..]);
        }
        stream
    }

    /// Sends `payload` and returns the answer of the same length.
    pub fn round_trip(&self, payload: &[u8]) -> Vec<u8> {
        self.send(payload);
        self.read_stream(payload.len())
    }

    /// Sends a command and returns its one-datagram answer.
    pub fn ask(&self, command: &[u8]) -> String {
        self.send(command);
        let datagram = self.receive();
        assert_eq!(datagram[0], b'D', "an answer expected, got {datagram:?}");
        String::from_utf8(datagram[1..].to_vec()).unwrap()
    }
}

/// A socket on the loopback address of `server`'s family.
fn bound_socket(server: SocketAddr) -> UdpSocket {
    let loopback = if server.is_ipv6() {
        "[::1]:0"
    } else {
        "127.0.0.1:0"
    };
    let socket = UdpSocket::bind(loopback).unwrap();
    socket.set_read_timeout(Some(HANG)).unwrap();
    socket
}

fn receive(socket: &UdpSocket) -> Vec<u8> {
    let mut buf = vec![0; 65536];
    let (len, _) = socket
        .recv_from(&mut buf)
        .expect("a datagram within the hang bound");
    buf.truncate(len);
    buf
}
