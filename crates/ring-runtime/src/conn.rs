//! Connection records (backend-independent): the socket, the outbound frame queue, the close
//! state machine, and the table that hands out generational [`ConnId`]s.

use std::net::{SocketAddr, TcpStream};

use crate::handler::CloseReason;
use crate::ids::{ConnId, TimerId};
pub(crate) use crate::send_queue::{SendQueue, WriteBatch};
use crate::slab::GenSlab;

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

/// One connection (72 bytes: an idle connection's whole record in the runtime).
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    pub(crate) phase: Phase,
    /// Where an outbound connection connects to, until its connect starts (boxed: accepted
    /// connections, the common case, have none).
    connect_to: Option<Box<SocketAddr>>,
    pub(crate) send: SendQueue,
    /// A write is in flight (io_uring) or waits for writability (epoll).
    pub(crate) writing: bool,
    /// Receive is armed.
    pub(crate) reading: bool,
    /// The peer's FIN arrived.
    pub(crate) read_done: bool,
    pub(crate) shutdown_write_requested: bool,
    pub(crate) write_shut: bool,
    pub(crate) close: Option<CloseMode>,
    pub(crate) reason: CloseReason,
    /// Backend operations submitted and not yet completed (io_uring).
    pub(crate) inflight: u32,
    /// io_uring user_data of the armed receive, for cancellation (0: none).
    pub(crate) read_op: u64,
    /// io_uring user_data of the in-flight write or connect, for cancellation (0: none).
    pub(crate) out_op: u64,
    pub(crate) drain_timer: Option<TimerId>,
    pub(crate) in_dirty: bool,
}

impl Conn {
    pub(crate) fn new(stream: TcpStream, phase: Phase) -> Self {
        Self {
            stream,
            phase,
            connect_to: None,
            send: SendQueue::default(),
            writing: false,
            reading: false,
            read_done: false,
            shutdown_write_requested: false,
            write_shut: false,
            close: None,
            reason: CloseReason::Local,
            inflight: 0,
            read_op: 0,
            out_op: 0,
            drain_timer: None,
            in_dirty: false,
        }
    }

    /// An outbound connection to `addr`, started in the turn's apply step.
    pub(crate) fn outbound(stream: TcpStream, addr: SocketAddr) -> Self {
        let mut conn = Self::new(stream, Phase::ConnectPending);
        conn.connect_to = Some(Box::new(addr));
        conn
    }

    /// For a connection whose connect has not started: moves it to `Connecting` and returns the
    /// address to connect to.
    pub(crate) fn start_connecting(&mut self) -> Option<SocketAddr> {
        if self.phase != Phase::ConnectPending {
            return None;
        }
        self.phase = Phase::Connecting;
        self.connect_to.take().map(|addr| *addr)
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
    pub(crate) fn mark_dirty(&mut self, id: ConnId) {
        if let Some(conn) = self.get_mut(id)
            && !conn.in_dirty
        {
            conn.in_dirty = true;
            self.dirty.push(id);
        }
    }

    /// Takes the dirty list, leaving `spare` (an empty vector to reuse) in its place.
    pub(crate) fn take_dirty(&mut self, spare: Vec<ConnId>) -> Vec<ConnId> {
        std::mem::replace(&mut self.dirty, spare)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn an_idle_connection_record_stays_small() {
        assert!(std::mem::size_of::<Conn>() <= 72);
    }
}
