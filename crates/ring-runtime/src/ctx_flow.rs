//! Flow control on one connection, the handler's side: reading paused (TCP pushes back on the
//! peer) and writing held (frames wait in the connection's queue).

use crate::ctx::ShardCtx;
use crate::ids::ConnId;

impl<M> ShardCtx<M> {
    /// Stops reading `conn`'s socket until [`Self::resume_reading`]: no more `on_data` (nor
    /// `on_read_closed`) for it, and the runtime stops receiving from the socket, so the
    /// kernel's receive buffer fills and TCP flow control slows the peer down. Bytes the
    /// runtime had already received wait and are handed over, in order, after the resume.
    /// Sending, timers and closes work as usual; other connections are not affected. No
    /// effect on a closing connection.
    pub fn pause_reading(&mut self, conn: ConnId) {
        if let Some(record) = self.conns.get_mut(conn)
            && record.is_usable()
            && !record.io.read_paused
        {
            record.io.read_paused = true;
            self.requests.read_changes.push(conn);
        }
    }

    /// [`Self::pause_reading`] for a pause expected to be brief: the receive stays armed until
    /// data actually arrives (held, in order, as for any pause), and only then is it cancelled
    /// (TCP pushes back). A peer that sends nothing meanwhile costs no system call.
    pub fn hold_reading(&mut self, conn: ConnId) {
        if let Some(record) = self.conns.get_mut(conn)
            && record.is_usable()
            && !record.io.read_paused
        {
            record.io.read_paused = true;
            self.requests.armed_holds.insert(conn);
            self.requests.read_changes.push(conn);
        }
    }

    /// Reads `conn` again after [`Self::pause_reading`] or [`Self::hold_reading`]: what arrived
    /// meanwhile is handed to `on_data` from the next turn on, in order.
    pub fn resume_reading(&mut self, conn: ConnId) {
        if let Some(record) = self.conns.get_mut(conn)
            && record.io.read_paused
        {
            record.io.read_paused = false;
            self.requests.armed_holds.remove(&conn);
            self.requests.read_changes.push(conn);
        }
    }

    /// Keeps `conn`'s queued frames, and those queued after them, from being written until
    /// [`Self::release_writing`]: for frames that may leave only once something else is
    /// durable (the broker's QoS 2 delivery journal). Frames still queue as usual; a closing
    /// connection writes what it has regardless.
    pub fn hold_writing(&mut self, conn: ConnId) {
        if let Some(record) = self.conns.get_mut(conn) {
            record.pacing.write_held = true;
        }
    }

    /// Writes `conn`'s frames again after [`Self::hold_writing`]: what was queued meanwhile
    /// leaves at the end of this turn.
    pub fn release_writing(&mut self, conn: ConnId) {
        if let Some(record) = self.conns.get_mut(conn)
            && record.pacing.write_held
        {
            record.pacing.write_held = false;
            self.conns.mark_dirty(conn);
        }
    }

    /// Whether reading `conn` is paused ([`Self::pause_reading`]).
    pub fn is_reading_paused(&self, conn: ConnId) -> bool {
        self.conns
            .get(conn)
            .is_some_and(|record| record.io.read_paused)
    }
}
