//! The shard loop: one thread, one backend, one handler, everything about its connections.

mod accept;
mod accept_pause;
mod apply;
mod datagram_state;
mod datagrams;
mod dispatch;
mod held;
mod layered;
mod load;
mod pacing;
mod paused;
pub(crate) mod pin_watch;
mod spare;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, Event, earliest};
use crate::ctx::{ShardCtx, ShardStats, TimerTarget};
use crate::error::RuntimeError;
use crate::handler::{CloseReason, Handler};
use crate::ids::{ConnId, ShardId, TimerId};
use crate::shared::Shared;

/// A released connection, to report to the handler after the apply step.
enum Ended {
    Closed(ConnId, CloseReason),
    ConnectFailed(ConnId, io::Error),
}

/// One shard: its handler, its context (connections, timers, outboxes) and its backend.
///
/// Field order matters on every exit path, a panic's unwinding included: the backend is
/// dropped first, so it cancels and reaps its in-flight operations while the connections'
/// descriptors (in `ctx`) are still open.
pub(crate) struct Shard<H: Handler, B: Backend> {
    backend: B,
    handler: H,
    ctx: ShardCtx<H::Message>,
    shared: Arc<Shared<H::Message>>,
    /// This turn's buffers, kept between turns for their capacity.
    turn: TurnBuffers,
    /// How the shard's mailbox is drained.
    mailbox: MailboxPace,
    pacing: pacing::Pacing,
    accept_pause: accept_pause::AcceptPause,
    /// What arrived for connections whose reading is paused.
    held: held::Held,
    /// When the wait about to begin was sized (`None` when it could not block).
    wait_began: Option<Instant>,
    /// At shutdown: since when this shard has been quiet, waiting for the others (`quiet.rs`).
    quiet_since: Option<Instant>,
    /// Datagram endpoints and what their drivers asked for.
    datagrams: datagram_state::Datagrams,
    /// A pinned shard's watch over its waits for its core (`pin_watch.rs`).
    unpinning: Option<pin_watch::Unpinning>,
}

/// One turn's buffers: the backend's events, the timers that fired, the connections to look at
/// in the apply step, those that ended and the connects that failed.
#[derive(Default)]
struct TurnBuffers {
    events: Vec<Event>,
    fired: Vec<(TimerId, TimerTarget)>,
    spare_dirty: Vec<ConnId>,
    ended: Vec<Ended>,
    failed_connects: Vec<(ConnId, io::Error)>,
}

/// How much of the mailbox one turn takes, and how soon a full outbox is retried.
struct MailboxPace {
    mailbox_retry: Duration,
    batches_per_turn: usize,
}

impl<H: Handler, B: Backend> Shard<H, B> {
    pub(crate) fn new(
        handler: H,
        mut ctx: ShardCtx<H::Message>,
        backend: B,
        shared: Arc<Shared<H::Message>>,
        config: &crate::RuntimeConfig,
        endpoints: Vec<crate::datagram::Endpoint>,
    ) -> Self {
        ctx.datagram_locals = endpoints.iter().map(|endpoint| endpoint.local).collect();
        let datagrams = datagram_state::Datagrams::new(
            endpoints,
            ctx.shard_count,
            config.datagram_forward_queue,
        );
        // Pacing counts from the context's creation, which precedes the shard's "ready".
        let pacing = pacing::Pacing::new(config, ctx.now);
        Self {
            backend,
            handler,
            ctx,
            shared,
            turn: TurnBuffers::default(),
            mailbox: MailboxPace {
                mailbox_retry: config.mailbox_retry,
                batches_per_turn: config.mailbox_batches,
            },
            pacing,
            accept_pause: accept_pause::AcceptPause::new(config.accept_backoff),
            held: held::Held::default(),
            wait_began: None,
            quiet_since: None,
            datagrams,
            unpinning: None,
        }
    }

    /// Watches this (pinned) shard's waits for its core and unpins it past the limit.
    pub(crate) fn unpin_when_shared(mut self, unpinning: Option<pin_watch::Unpinning>) -> Self {
        self.unpinning = unpinning;
        self
    }

    /// Runs turns until shutdown has closed every connection, then quiesces the backend.
    pub(crate) fn run(mut self) -> Result<ShardStats, RuntimeError> {
        loop {
            let timeout = self.wait_timeout();
            let drain = self.look(timeout)?;
            self.backend.add_stats(&mut self.ctx.stats);
            let now = self.ctx.clock.now();
            self.count_turn(now);
            self.ctx.now = now;
            self.watch_pin(now);
            self.pacing.adapt(now, self.ctx.stats.busy_ns);
            self.pacing.release_due(&mut self.ctx.conns, self.ctx.now);
            self.pass_fences(drain);
            self.dispatch_events();
            self.receive_datagrams();
            // The drain's input is handled (what it stamped is covered by the order's
            // horizons): other shards' fences may pass now, not a whole turn later.
            self.publish_drain(drain);
            self.fire_timers();
            self.fire_driver_deadlines();
            self.resume_accepting_if_due()?;
            self.deliver_messages();
            self.handler.on_turn_end(&mut self.ctx);
            self.flush_posts();
            self.check_shutdown();
            self.apply();
            if std::mem::take(&mut self.ctx.requests.release_memory) {
                self.release_idle_memory();
            }
            if self.shutdown_complete() {
                break;
            }
        }
        self.backend.quiesce(&mut self.ctx.conns)?;
        // What completed while quiescing (io_uring's last datagram sends).
        self.backend.add_stats(&mut self.ctx.stats);
        Ok(self.ctx.stats)
    }

    /// One look at the backend: fenced (a drain when asked) when the runtime keeps the fence
    /// board.
    fn look(&mut self, timeout: Option<Duration>) -> Result<Option<u64>, RuntimeError> {
        let side = (self.shared.fences.as_deref()).map(|board| crate::fence::FenceSide {
            board,
            index: self.ctx.shard.index(),
        });
        let (conns, events) = (&mut self.ctx.conns, &mut self.turn.events);
        self.backend.wait(conns, timeout, events, side.as_ref())
    }

    /// Tells the handler about fences that passed since the last turn; this turn's input
    /// (taken by `drain` if its look was one) needs a fence and a stamp of its own.
    fn pass_fences(&mut self, drain: Option<u64>) {
        let Some(book) = &mut self.ctx.fences else {
            return;
        };
        book.new_turn(drain);
        self.ctx.stats.input_fences_expired += book.refresh(self.ctx.now);
        if book.take_news() {
            self.handler.on_input_fences_passed(&mut self.ctx);
        }
    }

    /// The handler has had the events of `drain` (what they made it post may still wait for
    /// the turn's flush: a shard that waits on this one reads the horizons, which cover it).
    fn publish_drain(&self, drain: Option<u64>) {
        if let (Some(board), Some(drain)) = (&self.shared.fences, drain) {
            board.handled(self.ctx.shard.index(), drain);
        }
    }

    fn watch_pin(&mut self, now: Instant) {
        let shard = self.ctx.shard.index();
        if self.unpinning.as_mut().is_some_and(|u| u.look(now, shard)) {
            self.unpinning = None;
        }
    }

    fn shard_id(&self) -> ShardId {
        self.ctx.shard
    }

    /// Counts the turn that begins at `now`, and the busy time of the one before: from its
    /// start until its wait began (until `now` when that wait could not block).
    fn count_turn(&mut self, now: Instant) {
        let busy_until = self.wait_began.take().unwrap_or(now);
        let busy = busy_until.saturating_duration_since(self.ctx.now);
        let stats = &mut self.ctx.stats;
        stats.turns += 1;
        stats.busy_ns += u64::try_from(busy.as_nanos()).unwrap_or(u64::MAX);
    }

    /// Zero when work is already waiting; otherwise until the next timer (or the mailbox
    /// retry interval while a batch waits for room, or until a paced write is due). Records
    /// when a wait that may block began, for the busy time.
    fn wait_timeout(&mut self) -> Option<Duration> {
        let fences_passed = self.fences_passed_meanwhile();
        let ctx = &self.ctx;
        let blocked = ctx.outboxes.is_blocked();
        let posts_waiting = ctx.outboxes.has_pending() && !blocked;
        if ctx.conns.has_dirty()
            || !ctx.local_inbox.is_empty()
            || self.drain_wanted()
            || fences_passed
            || posts_waiting
            || self.held.is_due()
            || self.datagrams.has_work()
            || !self.shared.forward.is_empty(ctx.shard.index())
        {
            return Some(Duration::ZERO);
        }
        let now = ctx.clock.now();
        self.wait_began = Some(now);
        let ctx = &self.ctx;
        let deadline = earliest(ctx.timers.next_deadline(), self.pacing.next_due());
        let fence_deadline = ctx
            .fences
            .as_ref()
            .and_then(crate::fence::FenceBook::deadline);
        let deadline = earliest(deadline, fence_deadline);
        let timer = deadline.map(|deadline| deadline.saturating_duration_since(now));
        if blocked {
            return Some(timer.map_or(self.mailbox.mailbox_retry, |t| {
                t.min(self.mailbox.mailbox_retry)
            }));
        }
        if self.quiet_since.is_some() {
            let look = crate::quiet::QUIET_LOOK_EVERY;
            return Some(timer.map_or(look, |t| t.min(look)));
        }
        timer
    }

    /// Whether a fence this shard waits for passed during the turn (the shard that made it
    /// pass may have published before this one asked it for a wake-up).
    fn fences_passed_meanwhile(&mut self) -> bool {
        let Some(book) = &mut self.ctx.fences else {
            return false;
        };
        if book.is_waiting() {
            let now = self.ctx.clock.now();
            self.ctx.stats.input_fences_expired += book.refresh(now);
        }
        book.has_news()
    }

    /// Whether another shard waits for a drain of this one (it must not block before).
    fn drain_wanted(&self) -> bool {
        (self.shared.fences.as_ref())
            .is_some_and(|board| board.shard(self.ctx.shard.index()).drain_wanted())
    }

    /// At shutdown, whether this shard may end: its connections closed and its I/O done,
    /// nothing left to post, and every shard quiet with nothing left in this mailbox; or
    /// [`crate::quiet::QUIET_WAIT_LIMIT`] after its connections closed, whatever else waits
    /// (a post to a shard that already ended must not hold this one forever).
    fn shutdown_complete(&mut self) -> bool {
        let ctx = &self.ctx;
        if !(ctx.requests.shutting_down && ctx.conns.len() == 0) {
            return false;
        }
        self.close_datagrams_if_done();
        if !self.backend.is_idle() {
            return false;
        }
        let ctx = &self.ctx;
        // Real time: a test's manual clock must not hold the limit off.
        let now = Instant::now();
        let since = *self.quiet_since.get_or_insert(now);
        if now.saturating_duration_since(since) >= crate::quiet::QUIET_WAIT_LIMIT {
            return true;
        }
        if ctx.outboxes.has_pending() || !ctx.local_inbox.is_empty() {
            return false;
        }
        if self.shared.quiet.mark(ctx.shard) {
            self.shared.wake_every_shard();
        }
        self.shared.quiet.all() && self.shared.mailboxes[ctx.shard.index()].is_empty()
    }
}
