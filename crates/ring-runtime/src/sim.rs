//! A simulated shard (feature `sim`): one [`Handler`] driven directly, with virtual
//! connections (no socket, no backend, no thread) and a [`ManualClock`], so a handler's
//! protocol logic runs deterministically as a state machine: bytes and time in, bytes and
//! closes out. For fuzzing and deterministic tests; production builds do not carry it.
//!
//! Each driver call ([`SimShard::accept`], [`SimShard::data`], [`SimShard::advance`], ...) runs
//! turns like the real shard loop (`shard/mod.rs`): the I/O callback, expired timers, the
//! shard's own posts (`on_messages`, urgent lane first), `on_turn_end`, then an apply step in
//! which every write completes at once (its bytes go to the connection's output, see
//! [`SimShard::take_output`]) and finished closes are reported through `on_closed`. It repeats
//! turns until nothing is left to do. Only a single shard is simulated: a post to another
//! shard fails with [`crate::RuntimeError::NoSuchShard`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::clock::{Clock, ManualClock};
use crate::config::RuntimeConfig;
use crate::conn::{CloseMode, Conn, Phase, WriteBatch};
use crate::ctx::{ShardCtx, TimerTarget};
use crate::handler::{CloseReason, Handler};
use crate::ids::{ConnId, ShardId, TimerId};

/// Turns one driver call may run before [`SimShard::settled`] reports a handler that never
/// stops posting to itself.
const MAX_TURNS: usize = 1024;

/// What the driver sees of one virtual connection.
#[derive(Default)]
struct Peer {
    /// Bytes the handler sent and the driver has not taken yet.
    output: BytesMut,
    /// Set once the connection was released (`on_closed` ran).
    closed: Option<CloseReason>,
    /// The handler shut down the write side (FIN after `output`).
    write_shut: bool,
    /// Bytes that arrived while the handler had paused reading, in order.
    held: Vec<Bytes>,
}

/// One shard (shard 0 of 1) on virtual connections and a manual clock.
pub struct SimShard<H: Handler> {
    handler: H,
    ctx: ShardCtx<H::Message>,
    clock: ManualClock,
    peers: HashMap<ConnId, Peer>,
    fired: Vec<(TimerId, TimerTarget)>,
    batch: WriteBatch,
    settled: bool,
    /// Resumed connections with held bytes to hand over.
    resumed: Vec<ConnId>,
}

impl<H: Handler> SimShard<H> {
    /// A shard running `handler` with `config`'s limits (its shard count, listeners, backend
    /// and clock are ignored: one shard, no sockets, `clock`).
    pub fn new(handler: H, config: &RuntimeConfig, clock: ManualClock) -> Self {
        let mut config = config.clone();
        config.clock = Clock::Manual(clock.clone());
        Self {
            handler,
            ctx: ShardCtx::new(ShardId::new(0), 1, &config),
            clock,
            peers: HashMap::new(),
            fired: Vec::new(),
            batch: WriteBatch::default(),
            settled: true,
            resumed: Vec::new(),
        }
    }

    /// The handler, to inspect its state.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The shard's context as the handler sees it (counters, connection count).
    pub fn ctx(&self) -> &ShardCtx<H::Message> {
        &self.ctx
    }

    /// The clock the shard reads.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// Whether the last driver call ended with nothing left to do (`false`: the handler kept
    /// posting to itself or dirtying connections for [`MAX_TURNS`] turns).
    pub fn settled(&self) -> bool {
        self.settled
    }

    /// Hands `messages` to `on_messages` in a turn of their own (like a batch from another
    /// thread through [`crate::RuntimeHandle::post`]).
    pub fn post(&mut self, messages: Vec<H::Message>) {
        self.run(|handler, ctx| handler.on_messages(ctx, messages));
    }

    /// A connection from `peer` is accepted (`on_accept`).
    pub fn accept(&mut self, peer: SocketAddr) -> ConnId {
        let conn = self.ctx.conns.insert(Conn::simulated());
        self.ctx.stats.accepted += 1;
        self.peers.insert(conn, Peer::default());
        self.run(|handler, ctx| handler.on_accept(ctx, conn, peer));
        conn
    }

    /// `data` arrives on `conn` (`on_data`, if the handler still reads it; held until it
    /// resumes while it has paused reading).
    pub fn data(&mut self, conn: ConnId, data: Bytes) {
        if self.ctx.is_open(conn) && self.ctx.is_reading_paused(conn) {
            self.peers.entry(conn).or_default().held.push(data);
            return;
        }
        self.run(|handler, ctx| {
            if ctx.is_open(conn) {
                handler.on_data(ctx, conn, data);
            }
        });
    }

    /// Data arrives on several connections at once: one turn handles every arrival in order
    /// (as one wait's completions), before the messages that turn posts are delivered.
    /// Connections whose reading is paused hold theirs, as with [`Self::data`].
    pub fn data_together(&mut self, arrivals: Vec<(ConnId, Bytes)>) {
        let mut now = Vec::new();
        for (conn, data) in arrivals {
            if self.ctx.is_open(conn) && self.ctx.is_reading_paused(conn) {
                self.peers.entry(conn).or_default().held.push(data);
            } else {
                now.push((conn, data));
            }
        }
        self.run(|handler, ctx| {
            for (conn, data) in now {
                if ctx.is_open(conn) {
                    handler.on_data(ctx, conn, data);
                }
            }
        });
    }

    /// The peer sends FIN on `conn` (`on_read_closed`, if the handler still reads it).
    pub fn peer_closed(&mut self, conn: ConnId) {
        self.run(|handler, ctx| {
            let Some(record) = ctx.conns.get_mut(conn) else {
                return;
            };
            record.io.read_done = true;
            if record.is_usable() {
                handler.on_read_closed(ctx, conn);
            }
        });
    }

    /// The peer resets `conn`: it closes with [`CloseReason::Error`] (`ConnectionReset`).
    pub fn reset(&mut self, conn: ConnId) {
        self.run(|_, ctx| {
            let kind = std::io::ErrorKind::ConnectionReset;
            let reason = Some(CloseReason::Error { kind });
            ctx.request_close(conn, CloseMode::Abort, reason);
        });
    }

    /// Moves the clock forward by `by` and runs a turn: timers now due fire.
    pub fn advance(&mut self, by: Duration) {
        self.clock.advance(by);
        self.run(|_, _| {});
    }

    /// Takes what the handler sent on `conn` since the last call (empty for an unknown id).
    pub fn take_output(&mut self, conn: ConnId) -> Bytes {
        self.peers
            .get_mut(&conn)
            .map_or_else(Bytes::new, |peer| peer.output.split().freeze())
    }

    /// Whether `conn` was released (its `on_closed` ran), and why.
    pub fn closed(&self, conn: ConnId) -> Option<CloseReason> {
        self.peers.get(&conn).and_then(|peer| peer.closed)
    }

    /// Whether the handler shut down `conn`'s write side (or closed it).
    pub fn write_shut(&self, conn: ConnId) -> bool {
        self.peers
            .get(&conn)
            .is_some_and(|peer| peer.write_shut || peer.closed.is_some())
    }

    /// Forgets a released connection's record (its id is stale for good).
    pub fn forget(&mut self, conn: ConnId) {
        if self.closed(conn).is_some() {
            self.peers.remove(&conn);
        }
    }

    /// One turn with `io` as its I/O step, then turns without I/O until nothing is left.
    fn run(&mut self, io: impl FnOnce(&mut H, &mut ShardCtx<H::Message>)) {
        self.ctx.now = self.clock.now();
        io(&mut self.handler, &mut self.ctx);
        self.finish_turn();
        self.settled = false;
        for _ in 0..MAX_TURNS {
            let idle = self.ctx.local_inbox.is_empty() && !self.ctx.conns.has_dirty();
            if idle && self.resumed.is_empty() {
                self.settled = true;
                return;
            }
            self.hand_over_held();
            self.finish_turn();
        }
    }

    /// The rest of a turn after its I/O step (the order of `Shard::run`).
    fn finish_turn(&mut self) {
        self.fire_timers();
        self.deliver_messages();
        self.handler.on_turn_end(&mut self.ctx);
        let ctx = &mut self.ctx;
        ctx.outboxes.flush(&[], ctx.shard, &mut ctx.local_inbox);
        self.apply();
    }

    fn fire_timers(&mut self) {
        // No accept pause to end: virtual connections need no descriptors.
        let _resume_accept = self.ctx.fire_timers(&mut self.handler, &mut self.fired);
    }

    fn deliver_messages(&mut self) {
        let urgent = std::mem::take(&mut self.ctx.local_inbox.urgent);
        if !urgent.is_empty() {
            self.handler.on_messages(&mut self.ctx, urgent);
        }
        let ordered = std::mem::take(&mut self.ctx.local_inbox.ordered);
        if !ordered.is_empty() {
            self.handler.on_messages(&mut self.ctx, ordered);
        }
    }

    /// The I/O step of a turn after a resume: the bytes held for resumed connections, in order
    /// (those of a connection paused again meanwhile stay held).
    fn hand_over_held(&mut self) {
        for conn in std::mem::take(&mut self.resumed) {
            let held = self
                .peers
                .get_mut(&conn)
                .map(|peer| std::mem::take(&mut peer.held))
                .unwrap_or_default();
            for (index, data) in held.iter().enumerate() {
                if !self.ctx.is_open(conn) {
                    break;
                }
                if self.ctx.is_reading_paused(conn) {
                    if let Some(peer) = self.peers.get_mut(&conn) {
                        peer.held = held[index..].to_vec();
                    }
                    break;
                }
                self.handler.on_data(&mut self.ctx, conn, data.clone());
            }
        }
    }

    /// Notes the connections resumed this turn that have bytes held.
    fn take_read_changes(&mut self) {
        for conn in std::mem::take(&mut self.ctx.requests.read_changes) {
            let resumed = !self.ctx.is_reading_paused(conn);
            let held = self
                .peers
                .get(&conn)
                .is_some_and(|peer| !peer.held.is_empty());
            if resumed && held && !self.resumed.contains(&conn) {
                self.resumed.push(conn);
            }
        }
    }

    /// Completes every queued write, then releases closing connections and reports them.
    fn apply(&mut self) {
        self.take_read_changes();
        let dirty = self.ctx.conns.take_dirty(Vec::new());
        let mut ended = Vec::new();
        for id in dirty {
            if let Some(reason) = self.apply_conn(id) {
                ended.push((id, reason));
            }
        }
        for (conn, reason) in ended {
            if let Some(peer) = self.peers.get_mut(&conn) {
                peer.closed = Some(reason);
            }
            self.handler.on_closed(&mut self.ctx, conn, reason);
        }
    }

    /// Writes out `id`'s queue; returns its close reason when it was released.
    fn apply_conn(&mut self, id: ConnId) -> Option<CloseReason> {
        let conn = self.ctx.conns.get_mut(id)?;
        conn.io.in_dirty = false;
        conn.pacing.expedite = false;
        if conn.close.is_some() {
            conn.phase = Phase::Closing;
        }
        if conn.close == Some(CloseMode::Abort) {
            conn.send.clear();
        }
        let peer = self.peers.entry(id).or_default();
        let held = conn.pacing.write_held && conn.close.is_none();
        if conn.send.has_unsent() && !conn.io.write_shut && !held {
            conn.send.take_batch(usize::MAX, &mut self.batch);
            for buf in &self.batch.bufs {
                peer.output.extend_from_slice(buf);
            }
            let written = self.batch.len();
            conn.send.complete(&mut self.batch, written);
            self.ctx.stats.writes += 1;
        }
        if conn.io.shutdown_write_requested {
            conn.io.write_shut = true;
            peer.write_shut = true;
        }
        if conn.phase != Phase::Closing {
            return None;
        }
        let conn = self.ctx.conns.remove(id)?;
        if let Some(timer) = conn.drain_timer() {
            self.ctx.timers.cancel(timer);
        }
        self.ctx.stats.closed += 1;
        Some(conn.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctx::ShardCtx;

    /// Echoes data, closes on "bye", answers a timer with "tick", posts "ping" to itself and
    /// answers the post with "pong".
    #[derive(Default)]
    struct Echo {
        closed: Vec<(ConnId, CloseReason)>,
        conn: Option<ConnId>,
    }

    impl Handler for Echo {
        type Message = &'static str;

        fn on_accept(&mut self, ctx: &mut ShardCtx<&'static str>, conn: ConnId, _: SocketAddr) {
            self.conn = Some(conn);
            ctx.arm_timer(Duration::from_secs(5), 7);
        }

        fn on_data(&mut self, ctx: &mut ShardCtx<&'static str>, conn: ConnId, data: Bytes) {
            if data.as_ref() == b"bye" {
                ctx.close(conn);
            } else if data.as_ref() == b"post" {
                ctx.post(ShardId::new(0), "ping").expect("one shard");
            } else {
                ctx.send(conn, data).expect("open");
            }
        }

        fn on_closed(&mut self, _: &mut ShardCtx<&'static str>, conn: ConnId, r: CloseReason) {
            self.closed.push((conn, r));
        }

        fn on_timer(&mut self, ctx: &mut ShardCtx<&'static str>, _: TimerId, key: u64) {
            if let Some(conn) = self.conn {
                let _ = ctx.send(conn, Bytes::from(format!("tick {key}")));
            }
        }

        fn on_messages(&mut self, ctx: &mut ShardCtx<&'static str>, messages: Vec<&'static str>) {
            for message in messages {
                if let (Some(conn), "ping") = (self.conn, message) {
                    let _ = ctx.send(conn, Bytes::from_static(b"pong"));
                }
            }
        }
    }

    /// Echoes data; "pause" pauses reading until a timer a second later resumes it.
    #[derive(Default)]
    struct PausingEcho;

    impl Handler for PausingEcho {
        type Message = ();

        fn on_accept(&mut self, _: &mut ShardCtx<()>, _: ConnId, _: SocketAddr) {}

        fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
            assert!(!ctx.is_reading_paused(conn), "no on_data while paused");
            if data.as_ref() == b"pause" {
                ctx.pause_reading(conn);
                ctx.arm_timer(Duration::from_secs(1), conn.to_u64());
            }
            ctx.send(conn, data).expect("open");
        }

        fn on_timer(&mut self, ctx: &mut ShardCtx<()>, _: TimerId, key: u64) {
            ctx.resume_reading(ConnId::from_u64(key));
        }
    }

    #[test]
    fn a_paused_connection_gets_its_bytes_in_order_after_the_resume() {
        let mut sim = SimShard::new(PausingEcho, &RuntimeConfig::default(), ManualClock::new());
        let conn = sim.accept(peer());
        let other = sim.accept(peer());
        sim.data(conn, Bytes::from_static(b"pause"));
        sim.data(conn, Bytes::from_static(b"a"));
        sim.data(conn, Bytes::from_static(b"b"));
        sim.data(other, Bytes::from_static(b"flows"));
        assert_eq!(sim.take_output(conn).as_ref(), b"pause");
        assert_eq!(sim.take_output(other).as_ref(), b"flows");
        sim.advance(Duration::from_secs(1));
        assert_eq!(sim.take_output(conn).as_ref(), b"ab");
        assert!(sim.settled());
    }

    fn peer() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 5000))
    }

    #[test]
    fn data_timers_posts_and_closes_run_without_sockets() {
        let mut sim = SimShard::new(
            Echo::default(),
            &RuntimeConfig::default(),
            ManualClock::new(),
        );
        let conn = sim.accept(peer());
        sim.data(conn, Bytes::from_static(b"hello"));
        assert_eq!(sim.take_output(conn).as_ref(), b"hello");
        sim.data(conn, Bytes::from_static(b"post"));
        assert_eq!(
            sim.take_output(conn).as_ref(),
            b"pong",
            "the self-post looped back"
        );
        sim.advance(Duration::from_secs(4));
        assert!(sim.take_output(conn).is_empty());
        sim.advance(Duration::from_secs(2));
        assert_eq!(sim.take_output(conn).as_ref(), b"tick 7");
        sim.data(conn, Bytes::from_static(b"bye"));
        assert_eq!(sim.closed(conn), Some(CloseReason::Local));
        assert_eq!(sim.handler().closed, vec![(conn, CloseReason::Local)]);
        sim.data(conn, Bytes::from_static(b"late"));
        assert!(
            sim.take_output(conn).is_empty(),
            "a closed connection gets nothing"
        );
        assert!(sim.settled());
    }

    #[test]
    fn a_peer_close_and_a_reset_end_connections_with_their_reasons() {
        let mut sim = SimShard::new(
            Echo::default(),
            &RuntimeConfig::default(),
            ManualClock::new(),
        );
        let first = sim.accept(peer());
        let second = sim.accept(peer());
        sim.peer_closed(first);
        sim.reset(second);
        assert_eq!(sim.closed(first), Some(CloseReason::PeerClosed));
        let kind = std::io::ErrorKind::ConnectionReset;
        assert_eq!(sim.closed(second), Some(CloseReason::Error { kind }));
        assert_eq!(sim.ctx().connection_count(), 0);
    }
}
