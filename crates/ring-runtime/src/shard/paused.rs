//! Connections whose reading the handler paused ([`crate::ShardCtx::pause_reading`]): the
//! backend stops receiving from their sockets (TCP flow control then slows the peer), and what
//! had already been received when the pause took effect waits here, in order, until the
//! handler resumes the connection; it is handed over on the turn after the resume, before that
//! turn's new events.

use super::Shard;
use crate::backend::Backend;
use crate::conn::{CloseMode, Phase};
use crate::handler::{CloseReason, Handler};

impl<H: Handler, B: Backend> Shard<H, B> {
    /// Hands the held events of resumed connections to the handler (those of connections still
    /// paused are held again, in order).
    pub(super) fn dispatch_held(&mut self) {
        if !std::mem::take(&mut self.held.due) {
            return;
        }
        for event in std::mem::take(&mut self.held.events) {
            self.dispatch(event);
        }
    }

    /// The apply step's part for this turn's pauses and resumes: cancels the receive of a
    /// connection paused (its final state this turn), arms one for a resumed connection.
    pub(super) fn apply_read_changes(&mut self) {
        if self.ctx.requests.read_changes.is_empty() {
            return;
        }
        let mut changes = std::mem::take(&mut self.ctx.requests.read_changes);
        for id in changes.drain(..) {
            let Some(conn) = self.ctx.conns.get_mut(id) else {
                continue;
            };
            if conn.phase != Phase::Open || conn.close.is_some() {
                // A closing connection stops reading anyway; a connecting one starts reading
                // (or not, if paused) when its connect completes.
                continue;
            }
            if conn.is_virtual() {
                let paused = conn.io.read_paused;
                self.pause_virtual(id, paused);
                if !paused && self.held.holds_for(id) {
                    self.held.due = true;
                }
                continue;
            }
            if conn.io.read_paused {
                if conn.io.reading && !self.ctx.requests.armed_holds.contains(&id) {
                    self.backend.pause_read(id, conn);
                }
                continue;
            }
            // With io_uring a receive whose cancel has not landed yet is still `reading`: its
            // end arms the next one.
            if !conn.io.reading
                && !conn.io.read_done
                && let Err(error) = self.backend.start_read(id, conn)
            {
                let reason = Some(CloseReason::Error { kind: error.kind() });
                self.ctx.request_close(id, CloseMode::Abort, reason);
            }
            if self.held.holds_for(id) {
                self.held.due = true;
            }
        }
        self.ctx.requests.read_changes = changes;
    }
}
