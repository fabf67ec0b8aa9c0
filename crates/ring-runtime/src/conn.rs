//! Connection records (backend-independent): the socket, the outbound frame queue, the close
//! state machine, and the table that hands out generational [`ConnId`]s.

use std::collections::VecDeque;
use std::net::{SocketAddr, TcpStream};

use bytes::{Buf, Bytes};

use crate::handler::CloseReason;
use crate::ids::{ConnId, TimerId};
use crate::slab::GenSlab;

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Outbound connect not yet started (address kept until the turn's apply step).
    ConnectPending(SocketAddr),
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

/// Frames queued for one connection. Frames taken into an in-flight write stay counted in
/// `queued` until the write completes.
#[derive(Default)]
pub(crate) struct SendQueue {
    frames: VecDeque<Bytes>,
    queued: usize,
}

/// The frames of one writev/sendmsg, moved out of the queue while the write is in flight, and
/// the iovecs that point into them.
#[derive(Default)]
pub(crate) struct WriteBatch {
    pub(crate) bufs: Vec<Bytes>,
    pub(crate) iovecs: Vec<libc::iovec>,
}

impl WriteBatch {
    /// Total bytes in the batch.
    pub(crate) fn len(&self) -> usize {
        self.bufs.iter().map(Bytes::len).sum()
    }

    /// Rebuilds `iovecs` from `bufs`. The pointers stay valid while `bufs` is untouched: a
    /// `Bytes`' data does not move when the `Bytes` handle moves.
    pub(crate) fn build_iovecs(&mut self) {
        self.iovecs.clear();
        self.iovecs.extend(self.bufs.iter().map(|buf| libc::iovec {
            iov_base: buf.as_ptr().cast_mut().cast(),
            iov_len: buf.len(),
        }));
    }
}

impl SendQueue {
    pub(crate) fn push(&mut self, frame: Bytes) {
        self.queued += frame.len();
        self.frames.push_back(frame);
    }

    /// Bytes queued, including those of an in-flight write.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued
    }

    /// Whether frames wait that are not yet in a write.
    pub(crate) fn has_unsent(&self) -> bool {
        !self.frames.is_empty()
    }

    /// Moves up to `max_iovecs` frames into `batch` (which must be empty).
    pub(crate) fn take_batch(&mut self, max_iovecs: usize, batch: &mut WriteBatch) {
        let count = self.frames.len().min(max_iovecs);
        batch.bufs.extend(self.frames.drain(..count));
        batch.build_iovecs();
    }

    /// Accounts a completed write of `written` bytes: fully written frames are dropped, the
    /// rest go back to the front of the queue in their order. Leaves `batch` empty.
    pub(crate) fn complete(&mut self, batch: &mut WriteBatch, written: usize) {
        self.queued -= written.min(self.queued);
        let mut skip = written;
        let mut first_unwritten = batch.bufs.len();
        for (index, buf) in batch.bufs.iter_mut().enumerate() {
            if skip >= buf.len() {
                skip -= buf.len();
                continue;
            }
            buf.advance(skip);
            first_unwritten = index;
            break;
        }
        for buf in batch.bufs.drain(first_unwritten..).rev() {
            self.frames.push_front(buf);
        }
        batch.bufs.clear();
        batch.iovecs.clear();
        if self.frames.is_empty() {
            // An idle connection keeps no send buffer (memory per idle connection matters more
            // than one small allocation on the next send).
            self.frames = VecDeque::new();
        }
    }

    /// Drops everything queued (abort).
    pub(crate) fn clear(&mut self) {
        self.frames.clear();
        self.queued = 0;
    }
}

/// One connection.
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    pub(crate) phase: Phase,
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

    /// Whether the handler may still use it.
    pub(crate) fn is_usable(&self) -> bool {
        matches!(
            self.phase,
            Phase::Open | Phase::Connecting | Phase::ConnectPending(_)
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

    fn frames(queue: &mut SendQueue) -> Vec<Bytes> {
        let mut batch = WriteBatch::default();
        queue.take_batch(usize::MAX, &mut batch);
        batch.bufs
    }

    #[test]
    fn partial_write_resumes_where_it_stopped() {
        let mut queue = SendQueue::default();
        for frame in ["abc", "defg", "hi"] {
            queue.push(Bytes::from_static(frame.as_bytes()));
        }
        assert_eq!(queue.queued_bytes(), 9);
        let mut batch = WriteBatch::default();
        queue.take_batch(2, &mut batch);
        assert_eq!(batch.iovecs.len(), 2);
        assert_eq!(batch.len(), 7);
        assert_eq!(queue.queued_bytes(), 9, "in-flight bytes stay counted");
        queue.complete(&mut batch, 5);
        assert_eq!(queue.queued_bytes(), 4);
        assert!(batch.bufs.is_empty());
        let rest = frames(&mut queue);
        assert_eq!(
            rest,
            vec![Bytes::from_static(b"fg"), Bytes::from_static(b"hi")]
        );
    }

    #[test]
    fn unwritten_frames_keep_their_order() {
        let mut queue = SendQueue::default();
        for frame in ["a", "b", "c", "d"] {
            queue.push(Bytes::from_static(frame.as_bytes()));
        }
        let mut batch = WriteBatch::default();
        queue.take_batch(3, &mut batch);
        queue.complete(&mut batch, 0);
        let all: Vec<u8> = frames(&mut queue).concat();
        assert_eq!(all, b"abcd");
    }
}
