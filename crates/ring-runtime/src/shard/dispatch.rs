//! Turning backend events, expired timers and mailbox batches into handler callbacks.

use std::sync::atomic::Ordering;

use super::Shard;
use crate::backend::{Backend, Event};
use crate::conn::{CloseMode, Conn, Phase};
use crate::handler::{CloseReason, Handler};
use crate::mailbox::Lane;
use crate::sys::socket;

impl<H: Handler, B: Backend> Shard<H, B> {
    pub(super) fn dispatch_events(&mut self) {
        self.dispatch_held();
        let mut events = std::mem::take(&mut self.turn.events);
        for event in events.drain(..) {
            self.dispatch(event);
        }
        self.turn.events = events;
    }

    pub(super) fn dispatch(&mut self, event: Event) {
        let ctx = &mut self.ctx;
        match event {
            Event::Accepted { stream, peer } => {
                if ctx.requests.shutting_down || socket::prepare_accepted(&stream).is_err() {
                    return;
                }
                let conn = ctx.conns.insert(Conn::new(stream, Phase::Open));
                ctx.stats.accepted += 1;
                let record = ctx.conns.get_mut(conn).expect("invariant: just inserted");
                if let Err(error) = self.backend.start_read(conn, record) {
                    let reason = CloseReason::Error { kind: error.kind() };
                    ctx.request_close(conn, CloseMode::Abort, Some(reason));
                }
                self.handler.on_accept(ctx, conn, peer);
            }
            Event::Data { conn, data } => match ctx.conns.get_mut(conn) {
                Some(record) if record.is_usable() && record.io.read_paused => {
                    if ctx.requests.armed_holds.remove(&conn) && record.io.reading {
                        // Data came during a brief hold: now stop reading, as a pause does.
                        self.backend.pause_read(conn, record);
                    }
                    self.held.hold(Event::Data { conn, data });
                }
                Some(record) if record.is_usable() && record.layered => {
                    self.receive_layered(conn, data);
                }
                Some(record) if record.is_usable() => {
                    self.handler.on_data(ctx, conn, data);
                    self.receive_layer_input();
                }
                _ => {}
            },
            Event::Eof { conn } => {
                let Some(record) = ctx.conns.get_mut(conn) else {
                    return;
                };
                record.io.read_done = true;
                if record.is_usable() && record.io.read_paused {
                    // After the data held before it; `read_done` keeps the resume from arming
                    // another receive.
                    self.held.hold(Event::Eof { conn });
                } else if record.is_usable() {
                    self.handler.on_read_closed(ctx, conn);
                }
            }
            Event::Failed { conn, error } => {
                let reason = CloseReason::Error { kind: error.kind() };
                ctx.request_close(conn, CloseMode::Abort, Some(reason));
            }
            Event::Connected { conn, result } => self.connected(conn, result),
            Event::Writable { conn } => {
                if let Some(record) = ctx.conns.get_mut(conn) {
                    record.io.writing = false;
                    ctx.conns.mark_dirty(conn);
                }
            }
            Event::Wake => self.shared.mailboxes[self.shard_id().index()]
                .waker()
                .rearm(),
            Event::AcceptRefused { error } => self.accept_refused(&error),
        }
    }

    fn connected(&mut self, conn: crate::ConnId, result: std::io::Result<()>) {
        let ctx = &mut self.ctx;
        let Some(record) = ctx.conns.get_mut(conn) else {
            return;
        };
        if record.close.is_some() {
            // Closed while connecting: no on_connected, on_closed follows.
            record.phase = Phase::Closing;
            ctx.conns.mark_dirty(conn);
            return;
        }
        let result = result.and_then(|()| socket::take_socket_error(record.socket()?));
        match result {
            Ok(()) => {
                record.phase = Phase::Open;
                let paused = record.io.read_paused;
                if !paused && let Err(error) = self.backend.start_read(conn, record) {
                    let reason = CloseReason::Error { kind: error.kind() };
                    ctx.request_close(conn, CloseMode::Abort, Some(reason));
                }
                ctx.conns.mark_dirty(conn);
                self.handler.on_connected(ctx, conn, Ok(()));
            }
            Err(error) => {
                record.phase = Phase::Closing;
                self.turn.failed_connects.push((conn, error));
                ctx.conns.mark_dirty(conn);
            }
        }
    }

    pub(super) fn fire_timers(&mut self) {
        if self
            .ctx
            .fire_timers(&mut self.handler, &mut self.turn.fired)
        {
            self.accept_pause_over();
        }
    }

    /// Hands this turn's batches to the handler, urgent lane first: the shard's own urgent
    /// posts, the urgent batches in the mailbox, then its own ordered posts and the mailbox's
    /// ordered batches; at most `mailbox_batches` batches of each lane (the rest wait for the
    /// next turn).
    pub(super) fn deliver_messages(&mut self) {
        let shared = std::sync::Arc::clone(&self.shared);
        let mailbox = &shared.mailboxes[self.shard_id().index()];
        for lane in Lane::ALL {
            let local = match lane {
                Lane::Urgent => &mut self.ctx.local_inbox.urgent,
                Lane::Ordered => &mut self.ctx.local_inbox.ordered,
            };
            if !local.is_empty() {
                let local = std::mem::take(local);
                self.handler.on_messages(&mut self.ctx, local);
            }
            for _ in 0..self.mailbox.batches_per_turn {
                let Some(batch) = mailbox.pop_from(lane) else {
                    break;
                };
                self.handler.on_messages(&mut self.ctx, batch);
            }
        }
    }

    pub(super) fn flush_posts(&mut self) {
        let ctx = &mut self.ctx;
        if !ctx.outboxes.has_pending() {
            return;
        }
        ctx.outboxes
            .flush(&self.shared.mailboxes, ctx.shard, &mut ctx.local_inbox);
        if ctx.outboxes.is_blocked() {
            ctx.stats.mailbox_full += 1;
            self.shared.mailbox_full.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// On the first turn after [`crate::RuntimeHandle::shutdown`]: stop accepting, let the
    /// handler say goodbye, then close every connection gracefully.
    pub(super) fn check_shutdown(&mut self) {
        if self.ctx.requests.shutting_down || !self.shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        self.ctx.requests.shutting_down = true;
        self.backend.stop_accepting();
        self.handler.on_shutdown(&mut self.ctx);
        for conn in self.ctx.conns.ids() {
            let reason = Some(CloseReason::Shutdown);
            self.ctx.request_close(conn, CloseMode::Graceful, reason);
        }
    }
}
