//! The epoll backend: edge-triggered readiness for connections (registered once for
//! read + write + peer-close), level-triggered listeners and eventfd, nonblocking sockets,
//! one `sendmsg` (iovec batch) per connection per turn, `epoll_wait`'s timeout for timers.
//!
//! Reads copy from a per-shard scratch buffer into a fresh `Bytes` (one copy, the same
//! contract as the io_uring backend), so idle connections hold no read buffer here either.
//! Datagram sockets: `epoll/udp.rs`.

mod udp;

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use bytes::Bytes;

use crate::backend::{Backend, Event, InboundDatagram, accept_refused, timeout_unless_pending};
use crate::config::RuntimeConfig;
use crate::conn::{Conn, ConnTable, Phase, WriteBatch};
use crate::datagram::{DatagramStats, OutQueue};
use crate::error::RuntimeError;
use crate::fence::FenceSide;
use crate::ids::ConnId;
use crate::sys::epoll::{EDGE, ERROR, Epoll, HANG_UP, PEER_CLOSED, READABLE, Ready, WRITABLE};
use crate::sys::eventfd::EventFd;
use crate::sys::socket;

/// Token of the shard's eventfd. Connection tokens are packed [`ConnId`]s; listener `i` is
/// `LISTENER_BASE - i` (no connection id reaches these values: they would need ~2^32 slots).
const WAKE_TOKEN: u64 = u64::MAX;
const LISTENER_BASE: u64 = u64::MAX - 1;
const CONN_FLAGS: u32 = READABLE | WRITABLE | PEER_CLOSED | EDGE;

/// See the module documentation.
pub(crate) struct EpollBackend {
    epoll: Epoll,
    accept: EpollAccept,
    wake: EventFd,
    events: EpollEvents,
    reads: EpollReads,
    max_iovecs: usize,
    batch: WriteBatch,
    udp: udp::EpollUdp,
}

/// The listening sockets.
struct EpollAccept {
    listeners: Vec<TcpListener>,
    /// Listeners taken out of the epoll set after an accept ran out of descriptors (a
    /// level-triggered listener would wake every turn); put back by `resume_accepting`.
    paused: Vec<usize>,
    /// Most connections accepted from one listener per readiness.
    accept_batch: usize,
}

/// What `epoll_wait` reported, and how many events it may report at once.
struct EpollEvents {
    raw_events: Vec<libc::epoll_event>,
    ready: Vec<Ready>,
    event_capacity: usize,
}

/// The read buffer, how much one connection may read per turn, and the connections to read
/// next turn.
struct EpollReads {
    scratch: Vec<u8>,
    read_budget: usize,
    /// Connections whose read budget ran out (or that need a first read): read next turn.
    read_ready: Vec<ConnId>,
}

impl Backend for EpollBackend {
    fn new(
        config: &RuntimeConfig,
        listeners: Vec<TcpListener>,
        udp: Vec<UdpSocket>,
        wake: EventFd,
    ) -> Result<Self, RuntimeError> {
        let epoll = Epoll::new().map_err(|e| RuntimeError::syscall("epoll_create1", e))?;
        let udp = udp::EpollUdp::new(config, udp, &epoll)?;
        epoll
            .add(wake.as_raw_fd(), WAKE_TOKEN, READABLE)
            .map_err(|e| RuntimeError::syscall("epoll_ctl", e))?;
        for (index, listener) in listeners.iter().enumerate() {
            epoll
                .add(listener.as_raw_fd(), LISTENER_BASE - index as u64, READABLE)
                .map_err(|e| RuntimeError::syscall("epoll_ctl", e))?;
        }
        Ok(Self {
            epoll,
            accept: EpollAccept {
                listeners,
                paused: Vec::new(),
                accept_batch: config.accept_batch,
            },
            wake,
            events: EpollEvents {
                raw_events: Vec::new(),
                ready: Vec::new(),
                event_capacity: 1024,
            },
            reads: EpollReads {
                scratch: vec![0; config.recv_buffer_size as usize],
                read_budget: config.epoll_read_budget,
                read_ready: Vec::new(),
            },
            max_iovecs: config.max_iovecs,
            batch: WriteBatch::default(),
            udp,
        })
    }

    fn wait(
        &mut self,
        conns: &mut ConnTable,
        timeout: Option<Duration>,
        events: &mut Vec<Event>,
        fence: Option<&FenceSide<'_>>,
    ) -> Result<Option<u64>, RuntimeError> {
        // Every look is a drain once a wait reports fewer events than it could (a full report
        // is followed at once by another, up to MAX_LOOKS); a blocking one only flagged asleep,
        // so that a shard waiting for it wakes it. Bytes a connection could not read within
        // its read budget wait for the next turn's read, beyond the drain.
        const MAX_LOOKS: usize = 64;
        let mut timeout = self.wait_timeout(timeout);
        let Some(input) = fence.map(FenceSide::input) else {
            self.look(conns, timeout, events)?;
            return Ok(None);
        };
        if input.drain_wanted() || (timeout != Some(Duration::ZERO) && !input.fall_asleep()) {
            timeout = Some(Duration::ZERO);
        }
        let drain = input.begin_drain();
        let looked = self.look(conns, timeout, events);
        input.wake_up();
        looked?;
        for _ in 0..MAX_LOOKS {
            if self.events.ready.len() < self.events.event_capacity {
                return Ok(Some(drain));
            }
            self.look(conns, Some(Duration::ZERO), events)?;
        }
        Ok(None)
    }

    fn take_datagrams(&mut self, into: &mut Vec<InboundDatagram>) {
        self.udp.take(into);
    }

    fn send_datagrams(&mut self, endpoint: usize, out: &mut OutQueue, stats: &mut DatagramStats) {
        self.udp.send(endpoint, out, stats);
    }

    fn close_datagrams(&mut self) {
        self.udp.close(&self.epoll);
    }

    fn start_read(&mut self, id: ConnId, conn: &mut Conn) -> io::Result<()> {
        match self.epoll.add(conn.fd(), id.to_u64(), CONN_FLAGS) {
            Ok(()) => {}
            // Registered while connecting: data may have arrived before reading was on.
            Err(error) if error.raw_os_error() == Some(libc::EEXIST) => self.queue_read(id, conn),
            Err(error) => return Err(error),
        }
        conn.io.reading = true;
        Ok(())
    }

    fn stop_read(&mut self, _id: ConnId, conn: &mut Conn) {
        conn.io.reading = false;
    }

    fn pause_read(&mut self, _id: ConnId, conn: &mut Conn) {
        // Readiness of a connection that is not reading is ignored (edge-triggered: no spin);
        // `start_read` finds it registered and reads it on the next turn.
        conn.io.reading = false;
    }

    fn start_write(&mut self, _id: ConnId, conn: &mut Conn) -> io::Result<()> {
        let fd = conn.fd();
        while conn.send.has_unsent() {
            conn.send.take_batch(self.max_iovecs, &mut self.batch);
            match socket::send_vectored(fd, &self.batch.iovecs) {
                Ok(sent) => conn.send.complete(&mut self.batch, sent),
                Err(error) => {
                    conn.send.complete(&mut self.batch, 0);
                    match error.kind() {
                        io::ErrorKind::WouldBlock => {
                            conn.io.writing = true;
                            return Ok(());
                        }
                        io::ErrorKind::Interrupted => {}
                        _ => return Err(error),
                    }
                }
            }
        }
        Ok(())
    }

    fn cancel_output(&mut self, _id: ConnId, conn: &mut Conn) {
        conn.io.writing = false;
    }

    fn start_connect(&mut self, id: ConnId, conn: &mut Conn, addr: SocketAddr) -> io::Result<()> {
        socket::start_connect(conn.socket()?, addr)?;
        self.epoll.add(conn.fd(), id.to_u64(), CONN_FLAGS)
    }

    fn release(&mut self, _id: ConnId, conn: &mut Conn) {
        // Not registered (connect never started) is fine: the close below removes it anyway.
        let _ = self.epoll.delete(conn.fd());
    }

    fn stop_accepting(&mut self) {
        for listener in self.accept.listeners.drain(..) {
            let _ = self.epoll.delete(listener.as_raw_fd());
        }
        self.accept.paused.clear();
    }

    fn resume_accepting(&mut self) -> Result<(), RuntimeError> {
        for index in std::mem::take(&mut self.accept.paused) {
            if let Some(listener) = self.accept.listeners.get(index) {
                self.epoll
                    .add(listener.as_raw_fd(), LISTENER_BASE - index as u64, READABLE)
                    .map_err(|e| RuntimeError::syscall("epoll_ctl", e))?;
            }
        }
        Ok(())
    }

    fn is_idle(&self) -> bool {
        true
    }

    fn shrink_spare(&mut self) {
        self.events.ready.shrink_to_fit();
        self.reads.read_ready.shrink_to_fit();
    }

    fn quiesce(&mut self, _conns: &mut ConnTable) -> Result<(), RuntimeError> {
        Ok(())
    }
}

impl EpollBackend {
    /// Bounds the wait: not at all while reads are left over from the last turn.
    fn wait_timeout(&self, timeout: Option<Duration>) -> Option<Duration> {
        let pending = !self.reads.read_ready.is_empty() || self.udp.has_pending_reads();
        timeout_unless_pending(timeout, pending)
    }

    /// One `epoll_wait`, then the reads and accepts it calls for.
    fn look(
        &mut self,
        conns: &mut ConnTable,
        timeout: Option<Duration>,
        events: &mut Vec<Event>,
    ) -> Result<(), RuntimeError> {
        self.events.ready.clear();
        let mut raw = std::mem::take(&mut self.events.raw_events);
        let waited = self.epoll.wait(
            timeout,
            self.events.event_capacity,
            &mut raw,
            &mut self.events.ready,
        );
        self.events.raw_events = raw;
        waited.map_err(|e| RuntimeError::syscall("epoll_wait", e))?;
        for id in std::mem::take(&mut self.reads.read_ready) {
            if let Some(conn) = conns.get_mut(id) {
                conn.io.read_queued = false;
                self.read_conn(id, conn, false, events);
            }
        }
        self.udp.read_listed();
        for index in 0..self.events.ready.len() {
            let Ready { token, flags } = self.events.ready[index];
            match token {
                WAKE_TOKEN => {
                    // A failed read leaves the counter set: the fd stays readable, retried.
                    let _ = self.wake.drain();
                    events.push(Event::Wake);
                }
                token if self.udp.socket_of(token).is_some() => {
                    // A write edge only ends the wait: the apply step sends what waits.
                    if flags & READABLE != 0
                        && let Some(socket) = self.udp.socket_of(token)
                    {
                        self.udp.read(socket);
                    }
                }
                token if token > LISTENER_BASE - self.accept.listeners.len() as u64 => {
                    self.accept((LISTENER_BASE - token) as usize, events);
                }
                token => {
                    let id = ConnId::from_u64(token);
                    if let Some(conn) = conns.get_mut(id) {
                        self.conn_ready(id, conn, flags, events);
                    }
                }
            }
        }
        Ok(())
    }

    fn accept(&mut self, index: usize, events: &mut Vec<Event>) {
        let Some(listener) = self.accept.listeners.get(index) else {
            return;
        };
        for _ in 0..self.accept.accept_batch {
            match listener.accept() {
                Ok((stream, peer)) => events.push(Event::Accepted { stream, peer }),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) if error.raw_os_error().is_some_and(accept_refused) => {
                    // Out of descriptors: stop watching the listener until the shard resumes it.
                    let _ = self.epoll.delete(listener.as_raw_fd());
                    self.accept.paused.push(index);
                    events.push(Event::AcceptRefused { error });
                    break;
                }
                // WouldBlock: drained. Anything else (ECONNABORTED): the listener is
                // level-triggered, so the next turn retries.
                Err(_) => break,
            }
        }
    }

    fn conn_ready(&mut self, id: ConnId, conn: &mut Conn, flags: u32, events: &mut Vec<Event>) {
        let out_ready = flags & (WRITABLE | ERROR | HANG_UP) != 0;
        if conn.phase == Phase::Connecting {
            if out_ready {
                events.push(Event::Connected {
                    conn: id,
                    result: Ok(()),
                });
            }
            return;
        }
        // A connection listed for next turn has had its budget this turn: that read drains
        // whatever this edge announces (it reads until the socket is empty).
        let listed = conn.io.read_queued;
        if conn.io.reading && !listed && flags & (READABLE | PEER_CLOSED | HANG_UP | ERROR) != 0 {
            // A short read proves the socket drained, unless the peer's FIN (or an error) is
            // part of this edge: then read on until EOF/error.
            let stop_short = flags & (PEER_CLOSED | HANG_UP | ERROR) == 0;
            self.read_conn(id, conn, stop_short, events);
        }
        if conn.io.writing && out_ready {
            events.push(Event::Writable { conn: id });
        }
    }

    /// Lists `conn` to be read next turn, unless it already is.
    fn queue_read(&mut self, id: ConnId, conn: &mut Conn) {
        if !conn.io.read_queued {
            conn.io.read_queued = true;
            self.reads.read_ready.push(id);
        }
    }

    /// Reads until the socket is drained, the budget is spent (then again next turn), EOF or
    /// an error.
    fn read_conn(
        &mut self,
        id: ConnId,
        conn: &mut Conn,
        stop_short: bool,
        events: &mut Vec<Event>,
    ) {
        if !conn.io.reading {
            return;
        }
        let mut budget = self.reads.read_budget;
        loop {
            match conn
                .socket()
                .and_then(|mut stream| stream.read(&mut self.reads.scratch))
            {
                Ok(0) => {
                    conn.io.reading = false;
                    events.push(Event::Eof { conn: id });
                    return;
                }
                Ok(read) => {
                    let data = Bytes::copy_from_slice(&self.reads.scratch[..read]);
                    events.push(Event::Data { conn: id, data });
                    if stop_short && read < self.reads.scratch.len() {
                        // Short read: drained; new data raises a new edge.
                        return;
                    }
                    budget = budget.saturating_sub(read);
                    if budget == 0 {
                        self.queue_read(id, conn);
                        return;
                    }
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    conn.io.reading = false;
                    events.push(Event::Failed { conn: id, error });
                    return;
                }
            }
        }
    }
}
