//! Starting the shards and the handle other threads keep: addresses, posting, shutdown, join.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::backend::Backend;
use crate::backend_select::select_backend;
use crate::clock::WakeShards;
use crate::config::{BackendKind, RuntimeConfig};
use crate::ctx::{ShardCtx, ShardStats};
use crate::datagram::{DriverSetup, Endpoint, ForwardInboxes, OutQueue};
use crate::epoll::EpollBackend;
use crate::error::{PostRejected, RuntimeError};
use crate::exit::{ExitBoard, ShardExits};
use crate::handler::Handler;
use crate::ids::ShardId;
use crate::mailbox::Mailbox;
use crate::quiet::QuietBoard;
use crate::shard::Shard;
use crate::shared::Shared;
use crate::sys::sched::{self, SliceOutcome};
use crate::sys::{socket, thread, udp};
use crate::uring::UringBackend;

/// What a [`RuntimeControl`] can do to the shards, without knowing their message type.
trait ControlShards: Send + Sync {
    fn wake(&self, shard: ShardId);
    fn shutdown(&self);
}

impl<M: Send> ControlShards for Shared<M> {
    fn wake(&self, shard: ShardId) {
        if let Some(mailbox) = self.mailboxes.get(shard.index()) {
            mailbox.waker().wake();
        }
    }

    fn shutdown(&self) {
        self.request_shutdown();
    }
}

/// A handle another thread keeps to wake a shard (it runs a turn: `on_turn_end` sees whatever
/// that thread published) or to stop the runtime. Cheap to clone; outliving the runtime is
/// harmless (waking a stopped shard does nothing).
#[derive(Clone)]
pub struct RuntimeControl {
    shards: Arc<dyn ControlShards>,
}

impl std::fmt::Debug for RuntimeControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeControl").finish_non_exhaustive()
    }
}

impl RuntimeControl {
    /// Makes `shard` run a turn soon (no message needed).
    pub fn wake(&self, shard: ShardId) {
        self.shards.wake(shard);
    }

    /// Starts a graceful shutdown, as [`RuntimeHandle::shutdown`] does.
    pub fn shutdown(&self) {
        self.shards.shutdown();
    }
}

type ShardResult = Result<ShardStats, RuntimeError>;
type ShardThread = JoinHandle<ShardResult>;

/// Entry point: starts the shards.
pub struct Runtime;

impl Runtime {
    /// Validates `config`, picks the backend, binds the listeners (one `SO_REUSEPORT` socket
    /// per shard per address), then starts one pinned thread per shard and builds its handler
    /// there with `factory`. Returns once every shard is ready, or with the first error.
    pub fn start<H, F>(
        config: RuntimeConfig,
        factory: F,
    ) -> Result<RuntimeHandle<H::Message>, RuntimeError>
    where
        H: Handler,
        F: Fn(ShardId) -> H + Send + Sync + 'static,
    {
        config.validate()?;
        let backend = select_backend(&config)?;
        let shards = config.shard_count();
        let (listeners, local_addrs) = socket::bind_shard_listeners(
            &config.listen,
            shards,
            config.listen_backlog,
            &config.inherited,
        )?;
        let udp = udp::bind_shard_udp(
            &datagram_addrs(&config.datagram_listen),
            &datagram_addrs(&config.datagram_clients),
            shards,
            udp::UdpOptions {
                gro: config.datagram_gro,
                buffer: config.datagram_socket_buffer,
            },
        )?;
        let handover = duplicates(&listeners).map_err(|source| {
            RuntimeError::syscall("dup (listeners kept for an upgrade)", source)
        })?;
        let mailboxes = (0..shards)
            .map(|_| Mailbox::new(config.mailbox_batches))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| RuntimeError::syscall("eventfd", source))?;
        let fences = config.fences_input().then(|| {
            let wakers = mailboxes.iter().map(Mailbox::shared_waker).collect();
            Arc::new(crate::fence::FenceBoard::new(wakers))
        });
        let shared = Arc::new(Shared {
            fences,
            mailboxes,
            shutdown: AtomicBool::new(false),
            exits: Arc::new(ExitBoard::default()),
            accepts_refused: AtomicU64::new(0),
            mailbox_full: AtomicU64::new(0),
            quiet: QuietBoard::new(shards),
            forward: if !config.has_datagram_endpoints() {
                ForwardInboxes::none()
            } else {
                ForwardInboxes::new(shards, config.datagram_forward_queue)
            },
        });
        let wake: std::sync::Weak<dyn WakeShards> = Arc::downgrade(&shared) as _;
        config.clock.register(wake);
        let mut handle = RuntimeHandle {
            shared: Arc::clone(&shared),
            threads: Vec::with_capacity(shards),
            local_addrs,
            datagram_addrs: udp.addrs.clone(),
            backend,
            handover,
        };
        let endpoints = EndpointPlan {
            gso: udp.gso && config.datagram_gso,
        };
        let mut udp_sockets = udp.per_shard.into_iter();
        let factory = Arc::new(factory);
        let cores = thread::allowed_cores();
        let (ready_tx, ready_rx) = mpsc::channel();
        for (index, listeners) in listeners.into_iter().enumerate() {
            let shard = ShardId::new(u16::try_from(index).expect("invariant: validated count"));
            let start = ShardStart {
                shard,
                shards,
                core: (config.pin_threads && !cores.is_empty()).then(|| cores[index % cores.len()]),
                unpin_to: if config.pin_threads && config.unpin_when_shared && cores.len() > 1 {
                    cores.clone()
                } else {
                    Vec::new()
                },
                config: config.clone(),
                listeners,
                udp: udp_sockets.next().unwrap_or_default(),
                endpoints: endpoints.clone(),
                shared: Arc::clone(&shared),
                ready: ready_tx.clone(),
            };
            let factory = Arc::clone(&factory);
            let spawned = std::thread::Builder::new()
                .name(format!("ringmq-shard-{index}"))
                .spawn(move || start.run_reporting::<H, _>(backend, &*factory))
                .map_err(|source| RuntimeError::Spawn { shard, source });
            match spawned {
                Ok(thread) => handle.threads.push(thread),
                Err(error) => return Err(handle.fail(error)),
            }
        }
        drop(ready_tx);
        for _ in 0..shards {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return Err(handle.fail(error)),
                Err(_) => {
                    return Err(handle.fail(RuntimeError::ShardPanicked {
                        shard: ShardId::new(0),
                    }));
                }
            }
        }
        Ok(handle)
    }
}

/// What a shard thread needs to set itself up.
struct ShardStart<M> {
    shard: ShardId,
    shards: usize,
    core: Option<usize>,
    /// Every core the process may use, for a pinned shard that unpins itself
    /// (`RuntimeConfig::unpin_when_shared`); empty: it never does.
    unpin_to: Vec<usize>,
    config: RuntimeConfig,
    listeners: Vec<std::net::TcpListener>,
    /// One socket per datagram endpoint.
    udp: Vec<std::net::UdpSocket>,
    endpoints: EndpointPlan,
    shared: Arc<Shared<M>>,
    ready: mpsc::Sender<Result<(), RuntimeError>>,
}

/// What every shard's datagram endpoints share: whether the sockets take GSO trains.
#[derive(Clone)]
struct EndpointPlan {
    gso: bool,
}

/// The UDP addresses of `entries`, in order.
fn datagram_addrs(entries: &[crate::DatagramListen]) -> Vec<SocketAddr> {
    entries.iter().map(|listen| listen.addr).collect()
}

impl<M: Send + 'static> ShardStart<M> {
    /// Runs the shard on `backend` and records how its thread ended (a panic included, which
    /// then goes on unwinding so `join` still sees it).
    fn run_reporting<H, F>(self, backend: BackendKind, factory: &F) -> ShardResult
    where
        H: Handler<Message = M>,
        F: Fn(ShardId) -> H,
    {
        let shard = self.shard;
        let shared = Arc::clone(&self.shared);
        let exits = Arc::clone(&self.shared.exits);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match backend {
            BackendKind::Uring => self.run::<H, UringBackend, _>(factory),
            BackendKind::Epoll => self.run::<H, EpollBackend, _>(factory),
        }));
        exits.record(shard, &outcome);
        // An ended shard (a panic included) is quiet: the others stop waiting for it.
        if shared.quiet.mark(shard) {
            shared.wake_every_shard();
        }
        outcome.unwrap_or_else(|payload| std::panic::resume_unwind(payload))
    }

    fn run<H, B, F>(self, factory: &F) -> Result<ShardStats, RuntimeError>
    where
        H: Handler<Message = M>,
        B: Backend,
        F: Fn(ShardId) -> H,
    {
        // Pinning is best effort: a restricted cpuset must not stop the broker.
        let pinned = self
            .core
            .is_some_and(|core| thread::pin_current_thread(core).is_ok());
        let unpinning = (pinned && !self.unpin_to.is_empty())
            .then(|| crate::shard::pin_watch::Unpinning::new(self.unpin_to.clone()));
        if let Some(slice) = self.config.sched_slice {
            report_slice(self.shard, slice, sched::request_slice(slice));
        }
        let endpoints = match self.build_endpoints() {
            Ok(endpoints) => endpoints,
            Err(error) => {
                let _ = self.ready.send(Err(error));
                return Ok(ShardStats::default());
            }
        };
        let waker = self.shared.mailboxes[self.shard.index()].waker();
        let backend = waker
            .eventfd()
            .try_clone()
            .map_err(|source| RuntimeError::syscall("dup", source))
            .and_then(|wake| B::new(&self.config, self.listeners, self.udp, wake));
        let backend = match backend {
            Ok(backend) => backend,
            Err(error) => {
                let _ = self.ready.send(Err(error));
                return Ok(ShardStats::default());
            }
        };
        let mut ctx = ShardCtx::new(self.shard, self.shards, &self.config);
        if let Some(board) = &self.shared.fences {
            board.shard(self.shard.index()).watch_this_thread();
            ctx.fences = Some(crate::fence::FenceBook::new(
                Arc::clone(board),
                self.shard.index(),
            ));
        }
        let handler = factory(self.shard);
        let _ = self.ready.send(Ok(()));
        Shard::new(handler, ctx, backend, self.shared, &self.config, endpoints)
            .unpin_when_shared(unpinning)
            .run()
    }

    /// This shard's datagram endpoints (the listening ones, then the clients), each with its
    /// driver built here, on the shard's thread.
    fn build_endpoints(&self) -> Result<Vec<Endpoint>, RuntimeError> {
        let config = &self.config;
        let plan = &self.endpoints;
        let entries = config
            .datagram_listen
            .iter()
            .chain(&config.datagram_clients);
        let locals = self
            .udp
            .iter()
            .map(|socket| socket.local_addr())
            .collect::<io::Result<Vec<_>>>()
            .map_err(|source| RuntimeError::syscall("getsockname (datagram socket)", source))?;
        Ok(entries
            .zip(locals)
            .map(|(listen, local)| Endpoint {
                driver: (listen.driver)(DriverSetup {
                    shard: self.shard,
                    shard_count: self.shards,
                    local,
                    gso: plan.gso,
                }),
                local,
                gso: plan.gso,
                out: OutQueue::new(config.datagram_send_queue),
                timer: None,
            })
            .collect())
    }
}

/// Says how asking for a scheduler slice went: shard 0 for all (they run on one kernel), the
/// others only at debug level. Asking is best effort: the shard runs either way.
fn report_slice(shard: ShardId, slice: Duration, outcome: io::Result<SliceOutcome>) {
    let first = shard.index() == 0;
    match outcome {
        Ok(SliceOutcome::Applied(applied)) if first => {
            tracing::info!(
                ?applied,
                "shard threads run with the scheduler slice asked for"
            );
        }
        Ok(SliceOutcome::Ignored) if first => tracing::info!(
            ?slice,
            "the kernel keeps its own scheduler slice (custom slices need Linux 6.12 or later)"
        ),
        Ok(SliceOutcome::NotFair) if first => tracing::info!(
            "shard threads run under a real-time policy; the scheduler slice is left as it is"
        ),
        Err(error) if first => tracing::warn!(
            %error,
            ?slice,
            "could not ask for a scheduler slice (sched_setattr); shards keep the default"
        ),
        other => tracing::debug!(shard = shard.index(), ?other, "scheduler slice"),
    }
}

/// Posts batches to the shards from any thread; cheap to clone. Outliving the runtime is
/// harmless: posts then wait in mailboxes nobody reads.
pub struct Poster<M> {
    shared: Arc<Shared<M>>,
}

impl<M> Clone for Poster<M> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<M> std::fmt::Debug for Poster<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poster").finish_non_exhaustive()
    }
}

impl<M: Send> Poster<M> {
    /// Posts a batch to `shard` (one wake-up). When the mailbox is full the messages come
    /// back in the error.
    pub fn post(&self, shard: ShardId, messages: Vec<M>) -> Result<(), PostRejected<M>> {
        match self.shared.mailboxes.get(shard.index()) {
            Some(mailbox) => mailbox
                .push(messages)
                .map_err(|messages| PostRejected { shard, messages }),
            None => Err(PostRejected { shard, messages }),
        }
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shared.mailboxes.len()
    }
}

/// Held by the thread that started the runtime (or shared by reference).
pub struct RuntimeHandle<M> {
    shared: Arc<Shared<M>>,
    threads: Vec<ShardThread>,
    local_addrs: Vec<SocketAddr>,
    datagram_addrs: Vec<SocketAddr>,
    backend: BackendKind,
    /// A duplicate of every listening socket, for handing them to the next process (an
    /// upgrade: `sys/handover.rs`).
    handover: Vec<std::net::TcpListener>,
}

impl<M: Send + 'static> RuntimeHandle<M> {
    /// The bound listen addresses, in config order, with port 0 resolved.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// The bound datagram addresses ([`RuntimeConfig::datagram_listen`]), in config order,
    /// with port 0 resolved.
    pub fn datagram_addrs(&self) -> &[SocketAddr] {
        &self.datagram_addrs
    }

    /// Every listening socket (duplicates), to hand to the next process in an upgrade.
    pub fn listeners(&self) -> &[std::net::TcpListener] {
        &self.handover
    }

    /// The backend the shards run on.
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shared.mailboxes.len()
    }

    /// How the shards that have ended so far ended, and a way to wait for the first one: a
    /// shard that panics or fails ends alone, so a process watches this to stop the rest.
    pub fn exits(&self) -> ShardExits {
        ShardExits::new(Arc::clone(&self.shared.exits))
    }

    /// Accepts refused so far for want of file descriptors or memory (`EMFILE`, `ENFILE`,
    /// `ENOBUFS`, `ENOMEM`), all shards together; each pauses accepting on its listener for
    /// `RuntimeConfig::accept_backoff`.
    pub fn accepts_refused(&self) -> u64 {
        self.shared.accepts_refused.load(Ordering::Relaxed)
    }

    /// Flushes so far that found a destination's mailbox full (the batch waited for the next
    /// turn), all shards together.
    pub fn mailbox_full_flushes(&self) -> u64 {
        self.shared.mailbox_full.load(Ordering::Relaxed)
    }

    /// Posts a batch to `shard` from any thread (one wake-up). When the mailbox is full the
    /// messages come back in the error.
    pub fn post(&self, shard: ShardId, messages: Vec<M>) -> Result<(), PostRejected<M>> {
        self.poster().post(shard, messages)
    }

    /// A cloneable handle another thread keeps to post to the shards.
    pub fn poster(&self) -> Poster<M> {
        Poster {
            shared: Arc::clone(&self.shared),
        }
    }

    /// A handle for other threads: wake a shard, stop the runtime.
    pub fn control(&self) -> RuntimeControl {
        RuntimeControl {
            shards: Arc::clone(&self.shared) as Arc<dyn ControlShards>,
        }
    }

    /// Starts a graceful shutdown: shards stop accepting, call `on_shutdown`, drain queued
    /// writes (bounded by `drain_timeout`) and close. Returns at once; see [`Self::join`].
    pub fn shutdown(&self) {
        self.shared.request_shutdown();
    }

    /// Waits for every shard to exit (after [`Self::shutdown`]); returns their counters.
    pub fn join(mut self) -> Result<Vec<ShardStats>, RuntimeError> {
        self.join_all()
    }

    fn join_all(&mut self) -> Result<Vec<ShardStats>, RuntimeError> {
        let mut stats = Vec::with_capacity(self.threads.len());
        let mut first_error = None;
        for (index, thread) in self.threads.drain(..).enumerate() {
            let shard = ShardId::new(u16::try_from(index).unwrap_or(u16::MAX));
            match thread.join() {
                Ok(Ok(shard_stats)) => stats.push(shard_stats),
                Ok(Err(error)) => {
                    first_error.get_or_insert(error);
                }
                Err(_) => {
                    first_error.get_or_insert(RuntimeError::ShardPanicked { shard });
                }
            }
        }
        first_error.map_or(Ok(stats), Err)
    }

    fn fail(&mut self, error: RuntimeError) -> RuntimeError {
        self.shutdown();
        let _ = self.join_all();
        error
    }
}

impl<M> Drop for RuntimeHandle<M> {
    /// Dropping the handle shuts the runtime down and waits for the shards.
    fn drop(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        self.shared.request_shutdown();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// A duplicate of every shard's listening sockets (the same sockets: closing either leaves the
/// other open).
fn duplicates(
    listeners: &[Vec<std::net::TcpListener>],
) -> std::io::Result<Vec<std::net::TcpListener>> {
    listeners
        .iter()
        .flatten()
        .map(std::net::TcpListener::try_clone)
        .collect()
}
