//! Connection records (backend-independent): the socket, the outbound frame queue, the close
//! state machine, and the table that hands out generational [`ConnId`]s.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

use crate::close_reason::CloseReason;
use crate::ids::{ConnId, TimerId};
pub(crate) use crate::send_queue::{SendQueue, WriteBatch};
use crate::slab::{ChunkedVec, GenSlab};

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Outbound connect not yet started (the address waits in [`Conn::connect_to`] until the
    /// turn's apply step).
    ConnectPending,
    /// Outbound connect in flight.
    Connecting,
    /// Established.
    Open,
    /// Closing: no more handler callbacks except `on_closed`; released when its in-flight
    /// operations are done (and, for a graceful close, its queue is drained).
    Closing,
}

/// How a close was requested.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CloseMode {
    /// Send what is queued, then close.
    Graceful,
    /// Drop what is queued, cancel in-flight operations, close.
    Abort,
}

/// What few connections have: boxed so that the others do not carry it.
#[derive(Default)]
struct RareParts {
    /// Where an outbound connection connects to, until its connect starts.
    connect_to: Option<SocketAddr>,
    /// The deadline of a graceful close's drain.
    drain_timer: Option<TimerId>,
}

/// One connection (72 bytes: an idle connection's whole record in the runtime).
pub(crate) struct Conn {
    /// `None` only for a virtual connection (driven by a datagram endpoint's driver, or by the
    /// simulated shard, `sim.rs`), which never reaches a backend. Same
    /// size as the bare stream (the descriptor's niche).
    stream: Option<TcpStream>,
    pub(crate) phase: Phase,
    /// An outbound connection's address, a closing one's drain timer (boxed: an open accepted
    /// connection, the common case, has neither).
    rare: Option<Box<RareParts>>,
    pub(crate) send: SendQueue,
    pub(crate) close: Option<CloseMode>,
    pub(crate) reason: CloseReason,
    /// A [`crate::StreamLayer`] sits between its socket and the handler (`ShardCtx::layers`).
    pub(crate) layered: bool,
    /// Reading and writing: what is armed, what ended.
    pub(crate) io: IoState,
    /// Backend operations in flight.
    pub(crate) ops: PendingOps,
    /// Write pacing (see `shard/pacing.rs`).
    pub(crate) pacing: PacingState,
}

/// What is armed and what ended on one connection's socket.
#[derive(Debug, Default)]
pub(crate) struct IoState {
    /// A write is in flight (io_uring) or waits for writability (epoll).
    pub(crate) writing: bool,
    /// Receive is armed.
    pub(crate) reading: bool,
    /// The peer's FIN arrived.
    pub(crate) read_done: bool,
    /// The handler paused reading ([`crate::ShardCtx::pause_reading`]): no receive is armed
    /// (an armed one is cancelled in the apply step), and what was already on its way waits in
    /// the shard until [`crate::ShardCtx::resume_reading`].
    pub(crate) read_paused: bool,
    /// In the epoll backend's list of connections to read next turn (its read budget ran out,
    /// or reading restarted): listed once at most, so a flooding peer gets at most two budgets
    /// a turn (the listed read, and one more only if that read emptied the socket and a new
    /// edge came in the same turn).
    pub(crate) read_queued: bool,
    pub(crate) shutdown_write_requested: bool,
    pub(crate) write_shut: bool,
    pub(crate) in_dirty: bool,
}

/// A connection's backend operations submitted and not yet completed.
#[derive(Debug, Default)]
pub(crate) struct PendingOps {
    /// Operations in flight (io_uring).
    pub(crate) inflight: u32,
    /// io_uring user_data of the armed receive, for cancellation (0: none).
    pub(crate) read_op: u64,
    /// io_uring user_data of the in-flight write or connect, for cancellation (0: none).
    pub(crate) out_op: u64,
}

/// A connection's place in write pacing ([`crate::RuntimeConfig::write_interval`]) and the
/// handler's hold on its writes.
#[derive(Debug, Default)]
pub(crate) struct PacingState {
    /// Waiting in the shard's paced list.
    pub(crate) paced: bool,
    /// Its next write starts at the end of this turn even under pacing (see
    /// [`crate::ShardCtx::expedite`]).
    pub(crate) expedite: bool,
    /// Its last write carried more than one frame or came less than half a pacing hold after
    /// the previous one: a stream, which pacing may hold (see `shard/pacing.rs`).
    pub(crate) dense: bool,
    /// When its last write started, in the pacing clock's microseconds (0: never).
    pub(crate) last_write_us: u32,
    /// The handler holds its frames ([`crate::ShardCtx::hold_writing`]): no write starts
    /// while it is open and not closing (here rather than in `IoState`, whose padding is
    /// full: the record stays within 72 bytes).
    pub(crate) write_held: bool,
}

impl Conn {
    pub(crate) fn new(stream: TcpStream, phase: Phase) -> Self {
        Self::with_stream(Some(stream), phase)
    }

    /// A connection without a socket, driven by a datagram endpoint's driver.
    pub(crate) fn virtual_conn() -> Self {
        Self::with_stream(None, Phase::Open)
    }

    /// An outbound connection without a socket, whose datagram driver is connecting it.
    pub(crate) fn virtual_connecting() -> Self {
        Self::with_stream(None, Phase::Connecting)
    }

    /// A connection without a socket, driven by the simulated shard.
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn simulated() -> Self {
        Self::virtual_conn()
    }

    /// Whether it has no socket: the shard hands its frames to a datagram driver.
    #[inline]
    pub(crate) fn is_virtual(&self) -> bool {
        self.stream.is_none()
    }

    fn with_stream(stream: Option<TcpStream>, phase: Phase) -> Self {
        Self {
            stream,
            phase,
            rare: None,
            send: SendQueue::default(),
            close: None,
            reason: CloseReason::Local,
            layered: false,
            io: IoState::default(),
            ops: PendingOps::default(),
            pacing: PacingState::default(),
        }
    }

    /// An outbound connection to `addr`, started in the turn's apply step.
    pub(crate) fn outbound(stream: TcpStream, addr: SocketAddr) -> Self {
        let mut conn = Self::new(stream, Phase::ConnectPending);
        conn.rare_mut().connect_to = Some(addr);
        conn
    }

    /// For a connection whose connect has not started: moves it to `Connecting` and returns the
    /// address to connect to.
    pub(crate) fn start_connecting(&mut self) -> Option<SocketAddr> {
        if self.phase != Phase::ConnectPending {
            return None;
        }
        self.phase = Phase::Connecting;
        let addr = self.rare.as_mut()?.connect_to.take();
        self.drop_rare_if_empty();
        addr
    }

    /// The drain timer of a graceful close, if one is armed.
    pub(crate) fn drain_timer(&self) -> Option<TimerId> {
        self.rare.as_ref()?.drain_timer
    }

    /// Records (or, with `None`, forgets) the drain timer.
    pub(crate) fn set_drain_timer(&mut self, timer: Option<TimerId>) {
        if timer.is_none() && self.rare.is_none() {
            return;
        }
        self.rare_mut().drain_timer = timer;
        self.drop_rare_if_empty();
    }

    /// Takes the drain timer out, if one is armed.
    pub(crate) fn take_drain_timer(&mut self) -> Option<TimerId> {
        let timer = self.drain_timer();
        self.set_drain_timer(None);
        timer
    }

    fn rare_mut(&mut self) -> &mut RareParts {
        self.rare.get_or_insert_with(Box::default)
    }

    fn drop_rare_if_empty(&mut self) {
        if let Some(rare) = &self.rare
            && rare.connect_to.is_none()
            && rare.drain_timer.is_none()
        {
            self.rare = None;
        }
    }

    /// The socket (`EBADF` for a simulated connection, which has none).
    pub(crate) fn socket(&self) -> io::Result<&TcpStream> {
        self.stream
            .as_ref()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }

    /// The socket's descriptor (-1 for a simulated connection: a system call on it fails with
    /// `EBADF`).
    #[inline]
    pub(crate) fn fd(&self) -> RawFd {
        self.stream.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// Whether the handler may still use it.
    pub(crate) fn is_usable(&self) -> bool {
        matches!(
            self.phase,
            Phase::Open | Phase::Connecting | Phase::ConnectPending
        ) && self.close.is_none()
    }
}

/// The shard's connections plus the list of those needing work in this turn's apply step.
pub(crate) struct ConnTable {
    slab: GenSlab<Conn>,
    dirty: Vec<ConnId>,
}

impl ConnTable {
    pub(crate) fn new() -> Self {
        Self {
            slab: GenSlab::new(),
            dirty: Vec::new(),
        }
    }

    pub(crate) fn insert(&mut self, conn: Conn) -> ConnId {
        let (index, generation) = self.slab.insert(conn);
        ConnId::new(index, generation)
    }

    #[inline]
    pub(crate) fn get(&self, id: ConnId) -> Option<&Conn> {
        self.slab.get(id.index(), id.generation())
    }

    pub(crate) fn get_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.slab.get_mut(id.index(), id.generation())
    }

    pub(crate) fn remove(&mut self, id: ConnId) -> Option<Conn> {
        self.slab.remove(id.index(), id.generation())
    }

    /// Schedules `id` for the apply step (once per turn).
    #[inline]
    pub(crate) fn mark_dirty(&mut self, id: ConnId) {
        if let Some(conn) = self.get_mut(id)
            && !conn.io.in_dirty
        {
            conn.io.in_dirty = true;
            self.dirty.push(id);
        }
    }

    /// Takes the dirty list, leaving `spare` (an empty vector to reuse) in its place.
    pub(crate) fn take_dirty(&mut self, spare: Vec<ConnId>) -> Vec<ConnId> {
        std::mem::replace(&mut self.dirty, spare)
    }

    /// Shrinks the dirty list to what it holds (after a burst).
    pub(crate) fn shrink_dirty(&mut self) {
        self.dirty.shrink_to_fit();
    }

    pub(crate) fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }

    pub(crate) fn ids(&self) -> Vec<ConnId> {
        self.slab
            .keys()
            .into_iter()
            .map(|(index, generation)| ConnId::new(index, generation))
            .collect()
    }
}

/// A handler's per-connection state, keyed by [`ConnId`]: the runtime's connection indices are
/// dense (closed slots are reused), so the state sits inline in chunked storage indexed by
/// them, with the id's generation checked on every access. No hashing, no allocation per
/// connection, and growth never moves stored entries.
pub struct ConnMap<T> {
    slots: ChunkedVec<Option<(u32, T)>>,
    len: usize,
}

impl<T> Default for ConnMap<T> {
    fn default() -> Self {
        Self {
            slots: ChunkedVec::new(),
            len: 0,
        }
    }
}

impl<T> ConnMap<T> {
    /// Stores `value` for `id`, returning what a stale id at the same slot had.
    pub fn insert(&mut self, id: ConnId, value: T) -> Option<T> {
        let index = id.index() as usize;
        while self.slots.len() <= index {
            self.slots.push(None);
        }
        let slot = self
            .slots
            .get_mut(index)
            .expect("invariant: grown to cover the index");
        let previous = slot.replace((id.generation(), value));
        if previous.is_none() {
            self.len += 1;
        }
        previous.map(|(_, value)| value)
    }

    /// The state of `id`.
    pub fn get(&self, id: ConnId) -> Option<&T> {
        match self.slots.get(id.index() as usize)? {
            Some((generation, value)) if *generation == id.generation() => Some(value),
            _ => None,
        }
    }

    /// The state of `id`, for changes.
    pub fn get_mut(&mut self, id: ConnId) -> Option<&mut T> {
        match self.slots.get_mut(id.index() as usize)? {
            Some((generation, value)) if *generation == id.generation() => Some(value),
            _ => None,
        }
    }

    /// Removes and returns the state of `id`. Trailing free slots are dropped (and with them
    /// any chunk left empty).
    pub fn remove(&mut self, id: ConnId) -> Option<T> {
        let slot = self.slots.get_mut(id.index() as usize)?;
        if slot.as_ref().is_none_or(|(g, _)| *g != id.generation()) {
            return None;
        }
        let (_, value) = slot.take()?;
        self.len -= 1;
        while self.slots.last().is_some_and(Option::is_none) {
            self.slots.pop();
        }
        Some(value)
    }

    /// Connections with state.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none has state.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every connection with state, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (ConnId, &T)> {
        self.slots.iter().enumerate().filter_map(|(index, slot)| {
            let (generation, value) = slot.as_ref()?;
            let index = u32::try_from(index).expect("invariant: fewer than 2^32 slots");
            Some((ConnId::new(index, *generation), value))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_idle_connection_record_stays_small() {
        // 72 bytes, and 80 with the generation the table keeps beside it.
        assert!(std::mem::size_of::<Conn>() <= 72);
        assert!(std::mem::size_of::<Option<(u32, Conn)>>() <= 80);
        assert_eq!(
            std::mem::size_of::<Option<TcpStream>>(),
            std::mem::size_of::<TcpStream>(),
            "a simulated connection's missing socket costs nothing"
        );
    }

    #[test]
    fn conn_map_checks_generations_and_trims_its_end() {
        let mut map = ConnMap::default();
        assert!(map.insert(ConnId::new(2, 0), "a").is_none());
        assert!(map.insert(ConnId::new(0, 5), "b").is_none());
        assert_eq!(map.get(ConnId::new(2, 0)), Some(&"a"));
        assert_eq!(map.get(ConnId::new(2, 1)), None);
        assert_eq!(map.remove(ConnId::new(2, 1)), None);
        *map.get_mut(ConnId::new(0, 5)).unwrap() = "c";
        assert_eq!(
            map.iter().collect::<Vec<_>>(),
            vec![(ConnId::new(0, 5), &"c"), (ConnId::new(2, 0), &"a")]
        );
        assert_eq!(map.remove(ConnId::new(2, 0)), Some("a"));
        assert_eq!(map.slots.len(), 1, "trailing free slots are dropped");
        assert_eq!(map.insert(ConnId::new(0, 6), "d"), Some("c"));
        assert_eq!(map.len(), 1);
        assert_eq!(map.remove(ConnId::new(0, 6)), Some("d"));
        assert!(map.is_empty());
        assert_eq!(map.slots.len(), 0);
    }
}
