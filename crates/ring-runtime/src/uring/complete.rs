//! Completion handling: one match arm per operation kind.

use std::io;
use std::net::TcpStream;
use std::os::fd::FromRawFd;

use io_uring::cqueue;

use super::ops::Op;
use super::{Completion, UringBackend};
use crate::backend::{Backend, Event};
use crate::conn::{Conn, ConnTable};
use crate::error::RuntimeError;
use crate::ids::ConnId;

impl UringBackend {
    /// Handles one completion.
    pub(super) fn complete(
        &mut self,
        conns: &mut ConnTable,
        completion: Completion,
        events: &mut Vec<Event>,
    ) -> Result<(), RuntimeError> {
        let Completion {
            user_data,
            result,
            flags,
        } = completion;
        let more = cqueue::more(flags);
        let Some(op) = self.ops.get_mut(user_data) else {
            return Ok(());
        };
        match op {
            Op::Accept { listener } => {
                let listener = *listener;
                let refused = self.accepted(result, events);
                if !more {
                    self.ops.remove(user_data);
                    if refused && self.accept.accepting {
                        // Not re-armed at once (it would fail again at once: a spin); the
                        // shard resumes it after `accept_backoff`.
                        self.accept.paused.push(listener);
                    } else if self.accept.accepting {
                        self.arm_accept(listener)?;
                    } else if let Some(slot) = self.accept.listeners.get_mut(listener) {
                        // No operation uses the listener any more: close it.
                        *slot = None;
                    }
                }
            }
            Op::Recv { conn } => {
                let conn = *conn;
                self.received(conns, conn, result, flags, events);
                if !more {
                    self.ops.remove(user_data);
                    self.recv_ended(conns, conn, result, events);
                }
            }
            Op::Write(_) => self.wrote(conns, completion, events),
            Op::Connect(connect) => {
                let conn = connect.conn;
                self.ops.remove(user_data);
                if let Some(record) = finish_op(conns, conn) {
                    record.ops.out_op = 0;
                    conns.mark_dirty(conn);
                    let result = if result < 0 {
                        Err(os_error(result))
                    } else {
                        Ok(())
                    };
                    events.push(Event::Connected { conn, result });
                }
            }
            Op::WakeRead { .. } => {
                self.ops.remove(user_data);
                self.waker.wake_op = 0;
                events.push(Event::Wake);
                if !self.quiescing {
                    self.arm_wake()?;
                }
            }
            Op::Cancel => {
                self.ops.remove(user_data);
            }
            Op::UdpRecv(_) => self.udp_received(user_data, result)?,
            Op::UdpRecvMulti { endpoint } => {
                let endpoint = *endpoint;
                self.udp_received_multi(endpoint, completion)?;
                if !more {
                    self.ops.remove(user_data);
                    self.udp_multi_ended(endpoint, result)?;
                }
            }
            Op::UdpSend(_) => self.udp_sent(user_data, result),
        }
        Ok(())
    }

    /// Reports an accepted connection; returns whether the accept was refused for want of
    /// descriptors or memory (an error also ends a multishot accept).
    fn accepted(&mut self, result: i32, events: &mut Vec<Event>) -> bool {
        if result < 0 {
            // ECANCELED after stop_accepting. Others (ECONNABORTED...): re-armed at once.
            let refused = super::accept_refused(-result);
            if refused {
                events.push(Event::AcceptRefused {
                    error: os_error(result),
                });
            }
            return refused;
        }
        // SAFETY: a non-negative accept result is a new descriptor that nothing else owns.
        let stream = unsafe { TcpStream::from_raw_fd(result) };
        if let Ok(peer) = stream.peer_addr() {
            events.push(Event::Accepted { stream, peer });
        }
        false
    }

    /// A receive completion that carries data: copy it out, recycle the buffer.
    fn received(
        &mut self,
        conns: &mut ConnTable,
        conn: ConnId,
        result: i32,
        flags: u32,
        events: &mut Vec<Event>,
    ) {
        let Some(bid) = cqueue::buffer_select(flags) else {
            return;
        };
        let data = self
            .buf_ring
            .take(bid, usize::try_from(result).unwrap_or(0));
        if result > 0 && conns.get(conn).is_some_and(|c| c.ops.read_op != 0) {
            events.push(Event::Data { conn, data });
        }
    }

    /// The multishot receive ended: EOF, error, cancel, or the buffer ring ran dry.
    fn recv_ended(
        &mut self,
        conns: &mut ConnTable,
        conn: ConnId,
        result: i32,
        events: &mut Vec<Event>,
    ) {
        conns.mark_dirty(conn);
        let Some(record) = finish_op(conns, conn) else {
            return;
        };
        record.io.reading = false;
        // Not wanted: stopped for a close, the backend quiescing, or paused (the resume arms
        // a new receive).
        let still_wanted = record.ops.read_op != 0 && !self.quiescing && !record.io.read_paused;
        record.ops.read_op = 0;
        match result {
            0 => events.push(Event::Eof { conn }),
            result if result == -libc::ENOBUFS => {
                self.buf_ring.ran_dry();
                if still_wanted {
                    self.recv.starved.push_back(conn);
                }
            }
            result if result > 0 => {
                if still_wanted && let Err(error) = self.start_read(conn, record) {
                    events.push(Event::Failed { conn, error });
                }
            }
            result if result == -libc::ECANCELED => {
                // Cancelled by a pause that was lifted before the cancel landed.
                if still_wanted && let Err(error) = self.start_read(conn, record) {
                    events.push(Event::Failed { conn, error });
                }
            }
            result => events.push(Event::Failed {
                conn,
                error: os_error(result),
            }),
        }
    }

    /// A write completion: the result (frames accounted, partial writes re-queued) or, for
    /// zero-copy, the later notification that releases the frames.
    fn wrote(&mut self, conns: &mut ConnTable, completion: Completion, events: &mut Vec<Event>) {
        let Completion {
            user_data,
            result,
            flags,
        } = completion;
        let Some(Op::Write(write)) = self.ops.get_mut(user_data) else {
            return;
        };
        let conn = write.conn;
        if !cqueue::notif(flags) {
            if write.zerocopy {
                write.hold = write.batch.bufs.clone();
            }
            if let Some(record) = conns.get_mut(conn) {
                let written = usize::try_from(result).unwrap_or(0);
                record.send.complete(&mut write.batch, written);
                record.io.writing = false;
                record.ops.out_op = 0;
                // Only wake the apply step when there is something to do: more frames (a
                // layered connection's wait in its layer), a pending close or write shutdown,
                // or an error.
                let follow_up = record.send.has_unsent()
                    || record.layered
                    || record.close.is_some()
                    || record.io.shutdown_write_requested
                    || result < 0;
                if follow_up {
                    conns.mark_dirty(conn);
                }
                if result < 0 && result != -libc::ECANCELED {
                    events.push(Event::Failed {
                        conn,
                        error: os_error(result),
                    });
                }
            }
        }
        if cqueue::more(flags) {
            return;
        }
        if let Some(Op::Write(mut write)) = self.ops.remove(user_data) {
            write.hold.clear();
            write.batch.bufs.clear();
            write.batch.iovecs.clear();
            self.writes.write_pool.push(write);
        }
        if let Some(record) = finish_op(conns, conn)
            && record.close.is_some()
        {
            conns.mark_dirty(conn);
        }
    }
}

/// Accounts the end of one of `conn`'s operations.
fn finish_op(conns: &mut ConnTable, conn: ConnId) -> Option<&mut Conn> {
    let record = conns.get_mut(conn)?;
    record.ops.inflight = record.ops.inflight.saturating_sub(1);
    Some(record)
}

fn os_error(result: i32) -> io::Error {
    io::Error::from_raw_os_error(-result)
}
