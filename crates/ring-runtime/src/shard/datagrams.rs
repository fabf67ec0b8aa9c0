//! The shard's datagram endpoints: received and forwarded datagrams go to their driver, the
//! driver's answers become handler callbacks, and a virtual connection's frames, pauses,
//! write shutdown and close go to its driver where a TCP connection's would go to the backend.

use std::time::Instant;

use super::Shard;
use crate::backend::{Backend, Event, InboundDatagram};
use crate::conn::{CloseMode, Phase};
use crate::datagram::{Datagram, DatagramDriver, DriverClose, DriverEvent, DriverIo, DriverParts};
use crate::handler::Handler;
use crate::ids::ConnId;

impl<H: Handler, B: Backend> Shard<H, B> {
    /// Calls `call` on endpoint `index`'s driver with a [`DriverIo`] over this shard.
    fn with_driver(
        &mut self,
        index: usize,
        call: impl FnOnce(&mut dyn DatagramDriver, &mut DriverIo<'_>),
    ) {
        let Some(endpoint) = self.datagrams.endpoints.get_mut(index) else {
            return;
        };
        let ctx = &mut self.ctx;
        let mut deadline = None;
        let first_event = self.datagrams.events.len();
        let parts = DriverParts {
            endpoint: index,
            local: endpoint.local,
            gso: endpoint.gso && !endpoint.out.gso_refused(),
            now: ctx.now,
            shard: ctx.shard,
            shard_count: ctx.shard_count,
            conns: &mut ctx.conns,
            virtuals: &mut ctx.virtuals,
            named_peers: &mut ctx.named_peers,
            out: &mut endpoint.out,
            deadline: &mut deadline,
            events: &mut self.datagrams.events,
            forward: &self.shared.forward,
            forwarded_to: &mut self.datagrams.forwarded_to,
            stats: &mut ctx.stats.datagrams,
            shutting_down: ctx.requests.shutting_down,
        };
        call(endpoint.driver.as_mut(), &mut DriverIo::new(parts));
        if let Some(deadline) = deadline {
            self.set_driver_deadline(index, deadline);
        }
        self.note_driver_closes(first_event);
    }

    fn set_driver_deadline(&mut self, index: usize, deadline: Option<Instant>) {
        let Some(endpoint) = self.datagrams.endpoints.get_mut(index) else {
            return;
        };
        if let Some(timer) = endpoint.timer.take() {
            self.ctx.timers.cancel(timer);
        }
        if let Some(deadline) = deadline {
            let target = crate::ctx::TimerTarget::Datagram(index);
            endpoint.timer = Some(self.ctx.timers.insert(deadline, target));
        }
    }

    /// The I/O step's datagram part: what the sockets received and other shards forwarded
    /// goes to the drivers, then what they asked of the handler is done.
    pub(super) fn receive_datagrams(&mut self) {
        if self.datagrams.endpoints.is_empty() {
            return;
        }
        let mut inbound = std::mem::take(&mut self.datagrams.inbound);
        self.backend.take_datagrams(&mut inbound);
        self.ctx.stats.datagrams.received += inbound.len() as u64;
        for InboundDatagram { endpoint, received } in inbound.drain(..) {
            let Some(local) = self.datagrams.endpoints.get(endpoint).map(|e| e.local) else {
                continue;
            };
            let datagram = Datagram {
                peer: received.peer,
                local,
                data: received.data,
                segment_size: received.segment_size,
            };
            self.with_driver(endpoint, |driver, io| driver.on_datagram(io, datagram));
        }
        self.datagrams.inbound = inbound;
        let own = self.shard_id().index();
        // At most a queue's worth per turn: forwarding shards cannot hold this one here.
        for _ in 0..self.datagrams.forward_budget {
            let Some(forwarded) = self.shared.forward.pop(own) else {
                break;
            };
            self.ctx.stats.datagrams.forwarded_in += 1;
            let datagram = forwarded.datagram;
            self.with_driver(forwarded.endpoint, |driver, io| {
                driver.on_datagram(io, datagram);
            });
        }
        self.run_driver_events();
    }

    /// After the timers: the drivers whose deadline passed.
    pub(super) fn fire_driver_deadlines(&mut self) {
        if self.ctx.requests.expired_drivers.is_empty() {
            return;
        }
        for index in std::mem::take(&mut self.ctx.requests.expired_drivers) {
            if let Some(endpoint) = self.datagrams.endpoints.get_mut(index) {
                endpoint.timer = None;
            }
            self.with_driver(index, |driver, io| driver.on_timeout(io));
        }
        self.run_driver_events();
    }

    /// Does what the drivers asked of the handler (accepts, bytes, ends of streams, closes),
    /// in the order they asked.
    fn run_driver_events(&mut self) {
        while !self.datagrams.events.is_empty() {
            for event in std::mem::take(&mut self.datagrams.events) {
                match event {
                    DriverEvent::Opened { conn, peer } => {
                        self.ctx.conns.mark_dirty(conn);
                        self.handler.on_accept(&mut self.ctx, conn, peer);
                    }
                    DriverEvent::Connected { conn, result } => {
                        self.virtual_connected(conn, result);
                    }
                    DriverEvent::Data { conn, data } => self.dispatch(Event::Data { conn, data }),
                    DriverEvent::Finished { conn } => self.dispatch(Event::Eof { conn }),
                    DriverEvent::Closed { conn, reason } => {
                        // The handler's own close keeps its reason.
                        let closing = self.ctx.conns.get(conn).is_some_and(|c| c.close.is_some());
                        let reason = (!closing).then_some(reason);
                        self.ctx.request_close(conn, CloseMode::Abort, reason);
                    }
                }
            }
        }
    }

    /// A driver reported how an outbound connect ended: `on_connected(Ok)` now, or, once the
    /// connection is released, `on_connected(Err)`.
    fn virtual_connected(&mut self, conn: ConnId, result: std::io::Result<()>) {
        let ctx = &mut self.ctx;
        let Some(record) = ctx.conns.get_mut(conn) else {
            return;
        };
        if record.phase != Phase::Connecting || record.close.is_some() {
            // Closed while connecting: no on_connected, on_closed follows.
            return;
        }
        match result {
            Ok(()) => {
                record.phase = Phase::Open;
                ctx.conns.mark_dirty(conn);
                self.handler.on_connected(ctx, conn, Ok(()));
            }
            Err(error) => {
                record.phase = Phase::Closing;
                ctx.conns.mark_dirty(conn);
                self.turn.failed_connects.push((conn, error));
            }
        }
    }

    /// The apply step's start: the outbound virtual connections asked for this turn go to
    /// their drivers (those closed meanwhile are left out: their close follows).
    pub(super) fn start_datagram_connects(&mut self) {
        if self.ctx.requests.datagram_connects.is_empty() {
            return;
        }
        for conn in std::mem::take(&mut self.ctx.requests.datagram_connects) {
            let connecting =
                self.ctx.conns.get(conn).is_some_and(|record| {
                    record.phase == Phase::Connecting && record.close.is_none()
                });
            let Some(target) = self.ctx.virtuals.get(conn).filter(|_| connecting) else {
                continue;
            };
            let (endpoint, peer) = (target.endpoint, target.peer);
            self.with_driver(endpoint, |driver, io| driver.on_connect(io, conn, peer));
        }
    }

    /// Connections the last driver call (its events from `first`) reported closed: the
    /// driver is done with them, so the apply step may release them once they are closing (at
    /// once, when the call came from the apply step's own graceful close).
    fn note_driver_closes(&mut self, first: usize) {
        for event in &self.datagrams.events[first..] {
            let conn = match event {
                DriverEvent::Closed { conn, .. }
                | DriverEvent::Connected {
                    conn,
                    result: Err(_),
                } => *conn,
                _ => continue,
            };
            if let Some(record) = self.ctx.virtuals.get_mut(conn) {
                record.driver_closed = true;
            }
        }
    }

    /// The apply step hands a virtual connection's queued frames to its driver.
    pub(super) fn write_virtual(&mut self, id: ConnId) {
        let Some(endpoint) = self.ctx.virtuals.get(id).map(|v| v.endpoint) else {
            return;
        };
        let Some(conn) = self.ctx.conns.get_mut(id) else {
            return;
        };
        let mut frames = std::mem::take(&mut self.datagrams.frames);
        conn.send.take_all(&mut frames);
        if !frames.is_empty() {
            self.with_driver(endpoint, |driver, io| driver.on_send(io, id, &frames));
        }
        frames.clear();
        self.datagrams.frames = frames;
    }

    /// The apply step: the handler shut `id`'s writing down and its frames are with the
    /// driver.
    pub(super) fn finish_virtual(&mut self, id: ConnId) {
        let Some(record) = self.ctx.virtuals.get_mut(id) else {
            return;
        };
        if std::mem::replace(&mut record.finish_told, true) {
            return;
        }
        let endpoint = record.endpoint;
        self.with_driver(endpoint, |driver, io| driver.on_finish(io, id));
    }

    /// The apply step: a pause or resume of `id`'s reading goes to its driver.
    pub(super) fn pause_virtual(&mut self, id: ConnId, paused: bool) {
        let Some(endpoint) = self.ctx.virtuals.get(id).map(|v| v.endpoint) else {
            return;
        };
        self.with_driver(endpoint, |driver, io| {
            driver.on_read_paused(io, id, paused);
        });
    }

    /// The apply step, for a closing virtual connection whose frames are with the driver: tells
    /// the driver once (and again when a graceful close turned into an abort).
    pub(super) fn close_virtual(&mut self, id: ConnId) {
        let Some(mode) = self.ctx.conns.get(id).and_then(|conn| conn.close) else {
            return;
        };
        let Some(record) = self.ctx.virtuals.get_mut(id) else {
            return;
        };
        let how = match mode {
            CloseMode::Graceful => DriverClose::Graceful,
            CloseMode::Abort => DriverClose::Abort,
        };
        let told = record.close_told;
        if record.driver_closed || told == Some(how) || told == Some(DriverClose::Abort) {
            return;
        }
        record.close_told = Some(how);
        let endpoint = record.endpoint;
        self.with_driver(endpoint, |driver, io| driver.on_close(io, id, how));
    }

    /// Whether a closing virtual connection may be released: aborted, or closed by its
    /// driver.
    pub(super) fn virtual_released(&self, id: ConnId) -> bool {
        let aborted = self
            .ctx
            .conns
            .get(id)
            .is_some_and(|conn| conn.close == Some(CloseMode::Abort));
        let driver_closed = self.ctx.virtuals.get(id).is_some_and(|v| v.driver_closed);
        aborted || driver_closed
    }

    /// End of the apply step: the drivers' datagrams go to the sockets, and shards that were
    /// forwarded datagrams are woken.
    pub(super) fn flush_datagrams(&mut self) {
        if self.datagrams.endpoints.is_empty() {
            return;
        }
        let stats = &mut self.ctx.stats.datagrams;
        for (index, endpoint) in self.datagrams.endpoints.iter_mut().enumerate() {
            if !endpoint.out.is_empty() {
                self.backend.send_datagrams(index, &mut endpoint.out, stats);
            }
        }
        for (shard, woken) in self.datagrams.forwarded_to.iter_mut().enumerate() {
            if std::mem::take(woken) {
                self.shared.mailboxes[shard].waker().wake();
            }
        }
    }

    /// At shutdown, once the virtual connections are gone: the sockets stop receiving.
    pub(super) fn close_datagrams_if_done(&mut self) {
        if !self.datagrams.endpoints.is_empty() && self.ctx.conns.len() == 0 {
            self.backend.close_datagrams();
        }
    }

    /// For a shard gone quiet.
    pub(super) fn shrink_datagrams(&mut self) {
        for endpoint in &mut self.datagrams.endpoints {
            endpoint.out.shrink();
        }
        self.datagrams.events.shrink_to_fit();
        self.datagrams.inbound.shrink_to_fit();
        self.datagrams.frames.shrink_to_fit();
        self.ctx.virtuals.shrink();
    }
}
