//! The apply step at the end of a turn: start connects, writes and closes recorded by the
//! handler, release finished connections and report them.

use std::net::Shutdown;

use super::{Ended, Shard};
use crate::backend::Backend;
use crate::conn::{CloseMode, Phase};
use crate::handler::{CloseReason, Handler};
use crate::ids::ConnId;
use crate::sys::socket;

impl<H: Handler, B: Backend> Shard<H, B> {
    pub(super) fn apply(&mut self) {
        // Connects first: a pause asked for in the same turn then reaches a driver that knows
        // the connection.
        self.start_datagram_connects();
        self.apply_read_changes();
        let spare = std::mem::take(&mut self.turn.spare_dirty);
        let mut dirty = self.ctx.conns.take_dirty(spare);
        for conn in dirty.drain(..) {
            self.apply_conn(conn);
        }
        self.turn.spare_dirty = dirty;
        self.flush_datagrams();
        self.report_ended();
    }

    fn apply_conn(&mut self, id: ConnId) {
        if self.ctx.requests.shutting_down
            && self.ctx.conns.get(id).is_some_and(|c| c.close.is_none())
        {
            let reason = Some(CloseReason::Shutdown);
            self.ctx.request_close(id, CloseMode::Graceful, reason);
        }
        let Some(conn) = self.ctx.conns.get_mut(id) else {
            return;
        };
        conn.io.in_dirty = false;
        if conn.close.is_some() && !matches!(conn.phase, Phase::Open | Phase::Closing) {
            // Closing before the connection exists: nothing to drain.
            conn.close = Some(CloseMode::Abort);
        }
        if let Some(addr) = conn.start_connecting()
            && conn.close.is_none()
            && let Err(error) = self.backend.start_connect(id, conn, addr)
        {
            conn.phase = Phase::Closing;
            self.turn.failed_connects.push((id, error));
        }
        if conn.close.is_some() && conn.phase != Phase::Closing {
            conn.phase = Phase::Closing;
        }
        if conn.phase == Phase::Closing {
            if conn.io.reading {
                self.backend.stop_read(id, conn);
            }
            if conn.close == Some(CloseMode::Abort) {
                conn.send.clear();
                if conn.layered
                    && let Some(plain) = self.ctx.layers.plain_queue(id)
                {
                    plain.clear();
                }
                if conn.ops.out_op != 0 || conn.io.writing {
                    self.backend.cancel_output(id, conn);
                }
            }
        }
        let closing_virtual = conn.is_virtual() && conn.phase == Phase::Closing;
        if matches!(conn.phase, Phase::Open | Phase::Closing) {
            self.flush_writes(id);
        }
        if closing_virtual {
            self.close_virtual(id);
        }
        self.release_if_done(id);
    }

    /// Starts the connection's next write and, once the queue is empty, a requested
    /// write shutdown.
    fn flush_writes(&mut self, id: ConnId) {
        let Some(conn) = self.ctx.conns.get_mut(id) else {
            return;
        };
        if conn.io.write_shut || conn.io.writing || (conn.pacing.write_held && conn.close.is_none())
        {
            return;
        }
        let plain = self.ctx.layers.waiting(id, conn);
        if conn.send.has_unsent() || plain.encode_due {
            let (now, closing) = (self.ctx.now, self.ctx.requests.shutting_down);
            let queued = conn.send.queued_bytes() + plain.bytes;
            if self.pacing.holds(id, conn, now, closing, queued) {
                return;
            }
            // A layered connection's frames are encoded only now, when they are written: under
            // pacing, several turns' frames go through its layer together.
            let frames = conn.send.frames_waiting() + plain.frames;
            let conn = if plain.encode_due {
                self.encode_layered(id);
                match self.ctx.conns.get_mut(id) {
                    Some(conn)
                        if conn.send.has_unsent() && conn.close != Some(CloseMode::Abort) =>
                    {
                        conn
                    }
                    _ => return,
                }
            } else {
                conn
            };
            if conn.is_virtual() {
                self.pacing.wrote(conn, now, frames);
                self.write_virtual(id);
                return self.finish_write_if_due(id);
            }
            match self.backend.start_write(id, conn) {
                Ok(()) => {
                    self.pacing.wrote(conn, now, frames);
                    self.ctx.stats.writes += 1;
                }
                Err(error) => {
                    let reason = Some(CloseReason::Error { kind: error.kind() });
                    conn.send.clear();
                    self.ctx.request_close(id, CloseMode::Abort, reason);
                    return;
                }
            }
        }
        self.finish_write_if_due(id);
    }

    /// Once the queue is empty, a write shutdown the handler asked for: FIN on a socket, the
    /// end of the stream for a virtual connection's driver.
    fn finish_write_if_due(&mut self, id: ConnId) {
        let Some(conn) = self.ctx.conns.get_mut(id) else {
            return;
        };
        if !conn.io.shutdown_write_requested || conn.io.writing || conn.send.has_unsent() {
            return;
        }
        conn.io.write_shut = true;
        if conn.is_virtual() {
            self.finish_virtual(id);
            return;
        }
        // ENOTCONN after a peer reset is harmless here: the read side reports it.
        let _ = conn
            .socket()
            .and_then(|stream| stream.shutdown(Shutdown::Write));
    }

    fn release_if_done(&mut self, id: ConnId) {
        let Some(conn) = self.ctx.conns.get(id) else {
            return;
        };
        let done = conn.phase == Phase::Closing
            && conn.ops.inflight == 0
            && !conn.io.writing
            && !conn.io.reading
            && !conn.send.has_unsent();
        if !done || (conn.is_virtual() && !self.virtual_released(id)) {
            return;
        }
        let mut conn = self.ctx.conns.remove(id).expect("invariant: checked above");
        if conn.layered {
            self.ctx.layers.remove(id);
        }
        self.ctx.named_peers.remove(&id);
        self.ctx.virtuals.remove(id);
        self.held.forget(id);
        if !self.ctx.requests.armed_holds.is_empty() {
            self.ctx.requests.armed_holds.remove(&id);
        }
        self.backend.release(id, &mut conn);
        if let Some(timer) = conn.take_drain_timer() {
            self.ctx.timers.cancel(timer);
        }
        if conn.close == Some(CloseMode::Abort) {
            // An abort resets the peer instead of a clean FIN.
            let _ = conn.socket().and_then(socket::set_reset_on_close);
        }
        self.ctx.stats.closed += 1;
        let failed = self.turn.failed_connects.iter().position(|(c, _)| *c == id);
        self.turn.ended.push(match failed {
            Some(index) => Ended::ConnectFailed(id, self.turn.failed_connects.swap_remove(index).1),
            None => Ended::Closed(id, conn.reason),
        });
        drop(conn);
    }

    fn report_ended(&mut self) {
        let mut ended = std::mem::take(&mut self.turn.ended);
        for end in ended.drain(..) {
            match end {
                Ended::Closed(conn, reason) => self.handler.on_closed(&mut self.ctx, conn, reason),
                Ended::ConnectFailed(conn, error) => {
                    self.handler.on_connected(&mut self.ctx, conn, Err(error));
                }
            }
        }
        self.turn.ended = ended;
    }
}
