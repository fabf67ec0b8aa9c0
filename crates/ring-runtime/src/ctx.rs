//! [`ShardCtx`]: what a handler can do from inside a callback. Every call only records intent
//! (queue a frame, flag a close, arm a timer, add to a batch); the shard turns the intents into
//! system calls after [`crate::Handler::on_turn_end`].

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::clock::Clock;
use crate::close_reason::CloseReason;
use crate::conn::{CloseMode, Conn, ConnTable, SendQueue};
use crate::datagram::VirtualConns;
use crate::error::RuntimeError;
use crate::ids::{ConnId, ShardId, TimerId};
use crate::layer::{Layers, StreamLayer};
use crate::mailbox::{LocalInbox, Outboxes};
use crate::sys::socket;
use crate::timer::TimerWheel;

/// What a wheel entry stands for.
pub(crate) enum TimerTarget {
    /// A handler timer with its key.
    User(u64),
    /// The drain deadline of a graceful close.
    Drain(ConnId),
    /// The end of an accept pause after descriptors ran out.
    ResumeAccept,
    /// The deadline of a datagram endpoint's driver (the endpoint's index).
    Datagram(usize),
}

/// Counters of one shard, for tests, metrics and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Accepts that failed for want of descriptors or memory (each pauses accepting for
    /// `RuntimeConfig::accept_backoff`).
    pub accepts_refused: u64,
    /// Connections released (closed and all their operations finished).
    pub closed: u64,
    /// writev/sendmsg operations issued.
    pub writes: u64,
    /// Of which zero-copy sends.
    pub zerocopy_writes: u64,
    /// Multishot receives re-armed after the buffer ring ran dry (`ENOBUFS`).
    pub recv_rearms_enobufs: u64,
    /// Receive buffers whose pages were handed back to the OS (spare ones no longer kept
    /// warm, ones a shrunken ring held beyond its target, and every warm one when the shard
    /// went quiet).
    pub recv_buffers_released: u64,
    /// Receive buffers that may hold pages now (written since their pages were last handed
    /// back, or a hand-back the OS refused), as of the turn's start: a level, not a count;
    /// io_uring only (0 on epoll).
    pub recv_buffers_warm: u64,
    /// Flushes that found a destination mailbox full (batch kept for the next turn).
    pub mailbox_full: u64,
    /// Control messages kept for a destination beyond `max_pending_posts` (never refused).
    pub control_over_bound: u64,
    /// Loop turns begun (each wait for I/O, timers or mail starts one).
    pub turns: u64,
    /// Nanoseconds spent working, not waiting: from the start of each turn until its wait
    /// began (the whole turn when the wait could not block). Measured with the clock
    /// readings the loop takes anyway (after a wait, and when sizing a wait that may block).
    pub busy_ns: u64,
    /// Input fences that passed for having waited [`crate::INPUT_FENCE_PATIENCE`], not for
    /// the drains they asked for.
    pub input_fences_expired: u64,
    /// The datagram endpoints' counters.
    pub datagrams: crate::datagram::DatagramStats,
}

/// The per-shard context handed to every [`crate::Handler`] callback.
pub struct ShardCtx<M> {
    pub(crate) shard: ShardId,
    pub(crate) shard_count: usize,
    pub(crate) now: Instant,
    pub(crate) clock: Clock,
    pub(crate) conns: ConnTable,
    pub(crate) layers: Layers,
    /// Peer addresses the handler named for connections (a PROXY protocol header's client).
    pub(crate) named_peers: std::collections::HashMap<ConnId, SocketAddr>,
    /// Connections driven by a datagram endpoint's driver (no socket of their own).
    pub(crate) virtuals: VirtualConns,
    /// The shard's datagram endpoints' addresses, by endpoint index (set by the shard).
    pub(crate) datagram_locals: Vec<SocketAddr>,
    /// The most outbound virtual connects one turn may ask for
    /// (`RuntimeConfig::datagram_send_queue`: each sends at least one datagram).
    pub(crate) datagram_connect_limit: usize,
    pub(crate) timers: TimerWheel<TimerTarget>,
    pub(crate) outboxes: Outboxes<M>,
    pub(crate) local_inbox: LocalInbox<M>,
    pub(crate) sending: SendSettings,
    pub(crate) requests: TurnRequests,
    pub(crate) stats: ShardStats,
    /// This shard's input fences (`fence.rs`), when the runtime keeps the board.
    pub(crate) fences: Option<crate::fence::FenceBook>,
}

/// How frames are queued and how long a closing connection may drain.
pub(crate) struct SendSettings {
    pub(crate) drain_timeout: Duration,
    pub(crate) coalesce_below: usize,
}

/// What the handler asked of this turn's apply step, and whether the shard is shutting down.
#[derive(Default)]
pub(crate) struct TurnRequests {
    pub(crate) shutting_down: bool,
    /// Release spare memory at the turn's end ([`ShardCtx::release_idle_memory`]).
    pub(crate) release_memory: bool,
    /// Connections whose reading was paused or resumed this turn.
    pub(crate) read_changes: Vec<ConnId>,
    /// Bytes received before a layer was set, to pass through it after the callback.
    pub(crate) layer_input: Vec<(ConnId, Bytes)>,
    /// Datagram endpoints whose driver deadline passed this turn.
    pub(crate) expired_drivers: Vec<usize>,
    /// Outbound virtual connections to hand to their driver in the apply step (at most
    /// `ShardCtx::datagram_connect_limit`).
    pub(crate) datagram_connects: Vec<ConnId>,
    /// Connections paused by [`ShardCtx::hold_reading`] whose receive is still armed.
    pub(crate) armed_holds: std::collections::HashSet<ConnId>,
}

impl<M> ShardCtx<M> {
    pub(crate) fn new(shard: ShardId, shard_count: usize, config: &crate::RuntimeConfig) -> Self {
        let clock = config.clock.clone();
        let now = clock.now();
        crate::send_queue::keep_spare_queues(config.spare_send_queues);
        Self {
            shard,
            shard_count,
            now,
            clock,
            conns: ConnTable::new(),
            layers: Layers::default(),
            named_peers: std::collections::HashMap::new(),
            virtuals: VirtualConns::default(),
            datagram_locals: Vec::new(),
            datagram_connect_limit: config.datagram_send_queue,
            timers: TimerWheel::new(now, config.timer_tick),
            outboxes: Outboxes::new(shard_count, config.max_pending_posts),
            local_inbox: LocalInbox::default(),
            sending: SendSettings {
                drain_timeout: config.drain_timeout,
                coalesce_below: config.coalesce_below,
            },
            requests: TurnRequests::default(),
            stats: ShardStats::default(),
            fences: None,
        }
    }

    /// This shard.
    pub fn shard_id(&self) -> ShardId {
        self.shard
    }

    /// Number of shards in the runtime.
    pub fn shard_count(&self) -> usize {
        self.shard_count
    }

    /// Monotonic time from [`crate::RuntimeConfig::clock`], read once per turn (after the
    /// wait).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Live connections on this shard (including closing ones).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// This shard's counters.
    pub fn stats(&self) -> ShardStats {
        self.stats
    }

    /// For a shard that has gone quiet: at the end of this turn the runtime shrinks the
    /// buffers a burst grew (event lists, completion backlog, write pool, outbox batches)
    /// to what they hold, drops the emptied send queues it kept, hands back the pages of its
    /// receive buffers (io_uring), then hands this thread's free memory back to the OS
    /// ([`crate::return_free_memory`]). Costs a few reallocations and page faults when work
    /// resumes.
    pub fn release_idle_memory(&mut self) {
        self.requests.release_memory = true;
    }

    /// Whether `conn` is a virtual connection: opened by a datagram endpoint's driver (a
    /// QUIC connection's stream), with no socket of its own.
    pub fn is_virtual(&self, conn: ConnId) -> bool {
        self.virtuals.get(conn).is_some()
    }

    /// Who the transport of virtual connection `conn` says its peer is
    /// ([`crate::DriverIo::set_identity`]); `None` for other connections or when its driver
    /// set none.
    pub fn peer_identity(&self, conn: ConnId) -> Option<&crate::PeerIdentity> {
        self.virtuals.identity(conn)
    }

    /// Whether `conn` is live and not closing.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.conns.get(conn).is_some_and(Conn::is_usable)
    }

    /// Queues a frame. All frames queued for a connection during one turn leave in one
    /// writev/sendmsg after [`crate::Handler::on_turn_end`]; frames shorter than
    /// [`crate::RuntimeConfig::coalesce_below`] are copied together into one iovec.
    #[inline]
    pub fn send(&mut self, conn: ConnId, frame: Bytes) -> Result<(), RuntimeError> {
        let coalesce_below = self.sending.coalesce_below;
        self.queue_for(conn)?.push(frame, coalesce_below);
        self.conns.mark_dirty(conn);
        Ok(())
    }

    /// Lets `write` encode bytes straight into the connection's send buffer (after everything
    /// queued before); they leave like [`Self::send`]'s frames. `write` may truncate back what
    /// it appended (a frame it gives up on), never more.
    #[inline]
    pub fn send_with<R>(
        &mut self,
        conn: ConnId,
        write: impl FnOnce(&mut BytesMut) -> R,
    ) -> Result<R, RuntimeError> {
        let expected = self.sending.coalesce_below;
        let result = self.queue_for(conn)?.append(expected, write);
        self.conns.mark_dirty(conn);
        Ok(result)
    }

    /// Under write pacing ([`crate::RuntimeConfig::write_interval`]), makes `conn`'s queued
    /// frames leave at the end of this turn: for frames the peer waits on (acknowledgements,
    /// responses, the last message a window has room for). No effect without pacing.
    pub fn expedite(&mut self, conn: ConnId) {
        if let Some(record) = self.conns.get_mut(conn) {
            record.pacing.expedite = true;
        }
    }

    /// Frames shorter than this are copied into a connection's contiguous send buffer
    /// ([`crate::RuntimeConfig::coalesce_below`]).
    pub fn coalesce_below(&self) -> usize {
        self.sending.coalesce_below
    }

    /// The send queue of an open connection that still accepts frames (its layer's plain
    /// queue when it has a layer).
    #[inline]
    fn queue_for(&mut self, conn: ConnId) -> Result<&mut SendQueue, RuntimeError> {
        match self.conns.get_mut(conn) {
            Some(record) if record.is_usable() && !record.io.shutdown_write_requested => {
                if record.layered {
                    return layered_queue(&mut self.layers, conn);
                }
                Ok(&mut record.send)
            }
            _ => Err(RuntimeError::ConnClosed { conn }),
        }
    }

    /// Puts `layer` between `conn`'s socket and the handler: from now on the handler receives
    /// what the layer decodes and its frames go through the layer. Set it before anything is
    /// queued for the connection (in `on_accept` or `on_connected`); the layer's `send` runs in
    /// this turn's apply step even when nothing is queued (a client layer starts its
    /// handshake there).
    pub fn set_layer(&mut self, conn: ConnId, layer: Box<dyn StreamLayer>) {
        let Some(record) = self.conns.get_mut(conn) else {
            return;
        };
        record.layered = true;
        self.layers.insert(conn, layer);
        self.conns.mark_dirty(conn);
    }

    /// Passes `data`, bytes the handler received on `conn` before it set the connection's
    /// layer (what followed a PROXY protocol header in the same read), through that layer as
    /// if they had just arrived: right after the current `on_data` returns, before anything
    /// read later. Call it from `on_data`, after [`Self::set_layer`]. (The simulated shard
    /// has no layers and drops them.)
    pub fn receive_through_layer(&mut self, conn: ConnId, data: Bytes) {
        if !data.is_empty() {
            self.requests.layer_input.push((conn, data));
        }
    }

    /// From now on [`Self::peer_addr`] answers `peer` for `conn`: the client a PROXY protocol
    /// header named, not the balancer the socket is connected to.
    pub fn set_peer_addr(&mut self, conn: ConnId, peer: SocketAddr) {
        if self.conns.get(conn).is_some() {
            self.named_peers.insert(conn, peer);
        }
    }

    /// `conn`'s layer, if it has one of type `T`.
    pub fn layer_mut<T: StreamLayer>(&mut self, conn: ConnId) -> Option<&mut T> {
        let layer: &mut dyn std::any::Any = self.layers.layer_mut(conn)?;
        layer.downcast_mut::<T>()
    }

    /// The local address of `conn`'s socket: which listener accepted it (for a virtual
    /// connection, its datagram endpoint's address).
    pub fn local_addr(&self, conn: ConnId) -> std::io::Result<SocketAddr> {
        if let Some(record) = self.virtuals.get(conn) {
            return Ok(record.local);
        }
        let record = self
            .conns
            .get(conn)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotConnected))?;
        record.socket()?.local_addr()
    }

    /// The remote address of `conn`'s socket, or the one named with [`Self::set_peer_addr`]
    /// (for a virtual connection, the peer's latest address as its driver reported it).
    pub fn peer_addr(&self, conn: ConnId) -> std::io::Result<SocketAddr> {
        if let Some(peer) = self.named_peers.get(&conn) {
            return Ok(*peer);
        }
        if let Some(record) = self.virtuals.get(conn) {
            return Ok(record.peer);
        }
        let record = self
            .conns
            .get(conn)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotConnected))?;
        record.socket()?.peer_addr()
    }

    /// Bytes queued for `conn` and not yet acknowledged by a completed write (0 when unknown):
    /// the handler's backpressure signal.
    #[inline]
    pub fn queued_bytes(&self, conn: ConnId) -> usize {
        self.conns.get(conn).map_or(0, |record| {
            let plain = if record.layered {
                self.layers.queued_bytes(conn)
            } else {
                0
            };
            let in_driver = if record.is_virtual() {
                self.virtuals.get(conn).map_or(0, |v| v.unsent)
            } else {
                0
            };
            record.send.queued_bytes() + plain + in_driver
        })
    }

    /// Bytes queued for sending over every connection of this shard, in-flight writes included
    /// (a TLS or WebSocket connection counts its plain and its encoded queue): what the shard's
    /// send queues hold, for a budget over all of them.
    pub fn shard_queued_bytes(&self) -> usize {
        crate::send_queue::queued_on_this_thread()
    }

    /// Closes gracefully: no more callbacks for `conn` except `on_closed`; queued frames are
    /// sent first (bounded by `drain_timeout`), then the socket is closed.
    pub fn close(&mut self, conn: ConnId) {
        self.request_close(conn, CloseMode::Graceful, None);
    }

    /// Closes now: queued frames are dropped, in-flight operations cancelled, the peer gets a
    /// reset if data was pending.
    pub fn abort(&mut self, conn: ConnId) {
        self.request_close(conn, CloseMode::Abort, None);
    }

    /// Sends FIN after the queued frames; reading goes on. Later `send`s fail.
    pub fn shutdown_write(&mut self, conn: ConnId) {
        if let Some(record) = self.conns.get_mut(conn)
            && record.is_usable()
        {
            record.io.shutdown_write_requested = true;
            self.conns.mark_dirty(conn);
        }
    }

    /// Starts an outbound TCP connection (`TCP_NODELAY`, optionally bound to `local_bind`).
    /// The result arrives in [`crate::Handler::on_connected`].
    pub fn connect(
        &mut self,
        addr: SocketAddr,
        local_bind: Option<SocketAddr>,
    ) -> Result<ConnId, RuntimeError> {
        let socket = socket::outbound_socket(addr, local_bind)
            .map_err(|source| RuntimeError::Connect { addr, source })?;
        let conn = self.conns.insert(Conn::outbound(socket.into(), addr));
        self.conns.mark_dirty(conn);
        Ok(conn)
    }

    /// Starts an outbound virtual connection to `peer` through datagram endpoint `endpoint`
    /// (a client endpoint: [`crate::RuntimeConfig::datagram_client_endpoint`]). The id is this
    /// shard's at once; in the turn's apply step the endpoint's driver is asked to connect
    /// ([`crate::DatagramDriver::on_connect`]) and its outcome arrives in
    /// [`crate::Handler::on_connected`], as for [`Self::connect`]; frames sent before it wait.
    /// Fails with [`RuntimeError::Connect`]: no such endpoint (`NotFound`), the shard is
    /// shutting down (`ConnectionAborted`), or this turn already asked for
    /// [`crate::RuntimeConfig::datagram_send_queue`] connects (`WouldBlock`: ask next turn).
    pub fn connect_datagram(
        &mut self,
        endpoint: usize,
        peer: SocketAddr,
    ) -> Result<ConnId, RuntimeError> {
        let refuse = |kind: std::io::ErrorKind| RuntimeError::Connect {
            addr: peer,
            source: kind.into(),
        };
        let local = *self
            .datagram_locals
            .get(endpoint)
            .ok_or_else(|| refuse(std::io::ErrorKind::NotFound))?;
        if self.requests.shutting_down {
            return Err(refuse(std::io::ErrorKind::ConnectionAborted));
        }
        if self.requests.datagram_connects.len() >= self.datagram_connect_limit {
            return Err(refuse(std::io::ErrorKind::WouldBlock));
        }
        let conn = self.conns.insert(Conn::virtual_connecting());
        let record = crate::datagram::VirtualConn::new(endpoint, peer, local);
        self.virtuals.insert(conn, record);
        self.requests.datagram_connects.push(conn);
        self.conns.mark_dirty(conn);
        Ok(conn)
    }

    /// Arms a timer firing `after` from this turn's `now()`.
    pub fn arm_timer(&mut self, after: Duration, key: u64) -> TimerId {
        self.arm_timer_at(self.now + after, key)
    }

    /// Arms a timer firing at `deadline` (rounded up to the wheel's tick).
    pub fn arm_timer_at(&mut self, deadline: Instant, key: u64) -> TimerId {
        self.timers.insert(deadline, TimerTarget::User(key))
    }

    /// Moves a pending timer, O(1). `false` when it already fired or was cancelled.
    pub fn reset_timer(&mut self, timer: TimerId, deadline: Instant) -> bool {
        self.timers.reset(timer, deadline)
    }

    /// Cancels a pending timer, O(1). `false` when it already fired or was cancelled.
    pub fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.timers.cancel(timer).is_some()
    }

    /// Posts a message to `shard` (this one included). Messages for one shard travel as one
    /// batch per turn with one coalesced wake-up. When the destination mailbox is full the
    /// batch is kept and retried; beyond `max_pending_posts` this fails with
    /// [`RuntimeError::MailboxFull`].
    pub fn post(&mut self, shard: ShardId, message: M) -> Result<(), RuntimeError> {
        self.outboxes.post(shard, message)
    }

    /// Posts to `shard` (this one included) in order with [`Self::post`]'s messages, never
    /// refused for a full mailbox: for a message whose loss would break the receiver but that
    /// must arrive behind the data posted before it (a fence). Each one kept beyond
    /// `max_pending_posts` is counted in [`ShardStats::control_over_bound`].
    pub fn post_reliable(&mut self, shard: ShardId, message: M) -> Result<(), RuntimeError> {
        if self.outboxes.post_reliable(shard, message)? {
            self.stats.control_over_bound += 1;
        }
        Ok(())
    }

    /// Posts a control message to `shard` (this one included) in the urgent lane: never
    /// refused for a full mailbox, and handed to the receiver before the messages of
    /// [`Self::post`] and [`Self::post_reliable`] (so it does not wait behind a flood of
    /// data), with no order relative to them. Each one kept beyond `max_pending_posts` is
    /// counted in [`ShardStats::control_over_bound`].
    pub fn post_urgent(&mut self, shard: ShardId, message: M) -> Result<(), RuntimeError> {
        if self.outboxes.post_urgent(shard, message)? {
            self.stats.control_over_bound += 1;
        }
        Ok(())
    }

    /// Messages posted to `shard` that have not yet left this shard.
    pub fn pending_posts(&self, shard: ShardId) -> usize {
        self.outboxes.pending(shard)
    }

    /// Records a close request; `reason` overrides the default (`Local`, or `PeerClosed` after
    /// the peer's FIN).
    pub(crate) fn request_close(
        &mut self,
        conn: ConnId,
        mode: CloseMode,
        reason: Option<CloseReason>,
    ) {
        let Some(record) = self.conns.get_mut(conn) else {
            return;
        };
        match record.close {
            Some(CloseMode::Abort) => return,
            Some(CloseMode::Graceful) if mode == CloseMode::Graceful => return,
            _ => {}
        }
        let first = record.close.is_none();
        record.close = Some(mode);
        if let Some(reason) = reason {
            record.reason = reason;
        } else if first {
            record.reason = if record.io.read_done {
                CloseReason::PeerClosed
            } else {
                CloseReason::Local
            };
        }
        if mode == CloseMode::Graceful && record.drain_timer().is_none() {
            let deadline = self.now + self.sending.drain_timeout;
            let timer = self.timers.insert(deadline, TimerTarget::Drain(conn));
            record.set_drain_timer(Some(timer));
        }
        self.conns.mark_dirty(conn);
    }
}

/// A layered connection's plain queue: out of line, so the plain path of `send` and
/// `send_with` stays small enough to inline into the handler's code.
#[cold]
#[inline(never)]
fn layered_queue(layers: &mut Layers, conn: ConnId) -> Result<&mut SendQueue, RuntimeError> {
    layers
        .plain_queue(conn)
        .ok_or(RuntimeError::ConnClosed { conn })
}
