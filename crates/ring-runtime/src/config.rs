//! Runtime configuration: every limit the runtime applies, with documented defaults.

use std::net::SocketAddr;
use std::time::Duration;

use crate::clock::Clock;
use crate::datagram::DatagramListen;
use crate::error::RuntimeError;

/// Name of the environment variable that forces a backend (`epoll`, `uring` or `auto`).
pub const BACKEND_ENV: &str = "RINGMQ_BACKEND";

/// Which I/O backend the shards use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// Probe io_uring (opcodes, multishot receive, buffer rings) and fall back to epoll when it
    /// is unusable. [`BACKEND_ENV`] overrides this choice when set.
    #[default]
    Auto,
    /// io_uring only: start fails with a typed error when the kernel cannot do it.
    Uring,
    /// epoll only.
    Epoll,
}

impl BackendChoice {
    /// Parses `auto`, `uring`/`io_uring` or `epoll` (case-insensitive).
    pub fn parse(text: &str) -> Result<Self, RuntimeError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(Self::Auto),
            "uring" | "io_uring" | "io-uring" => Ok(Self::Uring),
            "epoll" => Ok(Self::Epoll),
            _ => Err(RuntimeError::InvalidConfig {
                key: "backend",
                reason: format!("unknown backend {text:?} (expected auto, uring or epoll)"),
            }),
        }
    }

    /// The choice after applying [`BACKEND_ENV`]: the environment wins over the config when set.
    pub fn with_env_override(self) -> Result<Self, RuntimeError> {
        match std::env::var(BACKEND_ENV) {
            Ok(value) => Self::parse(&value),
            Err(_) => Ok(self),
        }
    }
}

/// How write pacing decides how long a stream waits (see [`RuntimeConfig::write_interval`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WritePacing {
    /// The hold follows the shard's load: nothing waits while the shard thread uses little of
    /// its core, streams wait up to the whole interval once it is busy, and in between the hold
    /// grows with the load (`shard/load.rs`).
    #[default]
    Adaptive,
    /// Streams always wait the whole interval, whatever the load.
    Fixed,
}

impl WritePacing {
    /// Parses `adaptive` or `fixed` (case-insensitive).
    pub fn parse(text: &str) -> Result<Self, RuntimeError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "adaptive" => Ok(Self::Adaptive),
            "fixed" => Ok(Self::Fixed),
            _ => Err(RuntimeError::InvalidConfig {
                key: "write_pacing",
                reason: format!("unknown write pacing {text:?} (expected adaptive or fixed)"),
            }),
        }
    }
}

/// The backend a running runtime actually uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// io_uring with multishot accept/receive and a provided buffer ring per shard.
    Uring,
    /// epoll, edge-triggered, nonblocking sockets.
    Epoll,
}

/// Everything the runtime needs to start. Build with [`RuntimeConfig::default`] and adjust.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Number of shards (threads). `None`: one per available core. Default `None`.
    pub shards: Option<usize>,
    /// Pin shard `i` to core `i % cores`. Default `true`.
    pub pin_threads: bool,
    /// A pinned shard that waits for its core longer than 2 ms within a second (another
    /// thread holds it) lets itself run on every core the process may use, for good
    /// (`shard/pin_watch.rs`). Default `true`.
    pub unpin_when_shared: bool,
    /// The scheduler slice each shard thread asks for (Linux 6.12+, `sched_setattr`): a shard
    /// woken by a packet while another thread runs on its core then preempts it instead of
    /// waiting out that thread's slice. `None` keeps the kernel's default. The kernel clamps
    /// it to 0.1..=100 ms. Default `None`.
    pub sched_slice: Option<Duration>,
    /// Addresses to listen on; port 0 resolves once and all shards share the port.
    /// Default: none (outbound-only runtime, e.g. a load generator).
    pub listen: Vec<SocketAddr>,
    /// `listen(2)` backlog per shard listener. Default 1024.
    pub listen_backlog: i32,
    /// Backend selection. Default [`BackendChoice::Auto`]; [`BACKEND_ENV`] overrides it.
    pub backend: BackendChoice,
    /// Submission queue entries per ring (power of two). Default 4096.
    pub ring_entries: u32,
    /// Completion queue entries per ring (power of two, >= `ring_entries`). Default 16384.
    pub completion_entries: u32,
    /// Provided receive buffers per shard (power of two, at most 32768), the most the ring offers
    /// at once (it offers as many as the traffic needs). Default 512.
    pub recv_buffers: u16,
    /// Size of one receive buffer in bytes (also the epoll read chunk). Default 16 KiB.
    pub recv_buffer_size: u32,
    /// Bytes the epoll backend reads from one connection per readiness event before it moves on
    /// to the next connection (fairness). Default 256 KiB.
    pub epoll_read_budget: usize,
    /// Most iovecs in one writev/sendmsg (the kernel's `IOV_MAX` is 1024). Default 1024.
    pub max_iovecs: usize,
    /// Send with `SENDMSG_ZC` when one write's batch is at least this many bytes; `None` never
    /// uses zero-copy. Default `None`: on the measured kernel zero-copy never won (see
    /// docs/bench/history/ring-runtime.md), so it is opt-in.
    pub zerocopy_threshold: Option<usize>,
    /// Frames shorter than this are copied into the connection's contiguous send buffer, so
    /// many small frames leave as one iovec (the kernel's per-iovec cost dominates for frames
    /// of a few dozen bytes); longer frames are sent from their shared buffers. 0 turns
    /// coalescing off. Default 512 bytes (see docs/bench/history/scenarios.md, "Findings").
    pub coalesce_below: usize,
    /// Emptied send queues each shard thread keeps for its next connections that write, each
    /// with the unused rest of its send buffer (at most 1 KiB): a connection that gets one
    /// small frame per write (fan-out) then neither allocates nor frees its queue and buffer
    /// each time. 0 keeps none. Default 512 (about 700 KiB per shard when all are kept).
    pub spare_send_queues: usize,
    /// Write pacing: the longest a stream's frames wait so that they leave in a few large
    /// writes instead of one write per turn (each write costs the whole TCP transmit and
    /// receive path, which dominates small-message fan-out). A connection receiving frames
    /// less often than every half hold is written at once: pacing adds latency only to
    /// streams, at most this interval. How long they actually wait is [`Self::write_pacing`]'s
    /// choice. Default zero (off).
    pub write_interval: Duration,
    /// Whether the hold follows the shard's load (adaptive, the default: an idle shard holds
    /// nothing) or is always the whole [`Self::write_interval`] (fixed).
    pub write_pacing: WritePacing,
    /// With pacing on, a connection with at least this many bytes waiting is written at once.
    /// Default 64 KiB.
    pub write_batch_bytes: usize,
    /// Timer wheel tick. Default 1 ms.
    pub timer_tick: Duration,
    /// Message batches a shard's mailbox holds (bounded). Default 4096.
    pub mailbox_batches: usize,
    /// Messages a shard keeps for one destination while that destination's mailbox is full;
    /// beyond it [`crate::ShardCtx::post`] returns [`RuntimeError::MailboxFull`]. Default 65536.
    pub max_pending_posts: usize,
    /// How long a shard sleeps at most before retrying a batch that found a full mailbox.
    /// Default 200 µs.
    pub mailbox_retry: Duration,
    /// How long a graceful close (or shutdown) waits for queued writes before it aborts the
    /// connection. Default 5 s.
    pub drain_timeout: Duration,
    /// Connections accepted per listener per turn by the epoll backend. Default 256.
    pub accept_batch: usize,
    /// When an accept fails for want of file descriptors or memory (`EMFILE`, `ENFILE`,
    /// `ENOBUFS`, `ENOMEM`), the listener stops accepting for this long (one warning per
    /// pause) instead of retrying at once. Default 100 ms.
    pub accept_backoff: Duration,
    /// How long a shard that ends abnormally (an error or a handler panic) waits for the kernel
    /// to finish its cancelled io_uring operations; whatever is still in flight after it is
    /// leaked, never freed under the kernel. Default 1 s.
    pub cancel_timeout: Duration,
    /// Where the shards read the time: [`Clock::System`] by default; tests run timers on a
    /// [`crate::ManualClock`] they advance.
    pub clock: Clock,
    /// Listening sockets a previous process handed over (a zero-downtime upgrade): used for
    /// their addresses instead of binding new ones. Empty by default.
    pub inherited: crate::sys::handover::InheritedListeners,
    /// UDP addresses served by a [`crate::DatagramDriver`] (QUIC): one `SO_REUSEPORT` socket
    /// and one driver per shard each; port 0 resolves once. Default: none.
    pub datagram_listen: Vec<DatagramListen>,
    /// Client endpoints, for outbound virtual connections
    /// ([`crate::ShardCtx::connect_datagram`]): every shard binds its own socket on the
    /// address (no `SO_REUSEPORT`; with port 0, each shard gets its own ephemeral port), so
    /// the replies to a shard's connections come back to that shard. Their endpoint indexes
    /// follow [`Self::datagram_listen`]'s ([`Self::datagram_client_endpoint`]). Default: none.
    pub datagram_clients: Vec<DatagramListen>,
    /// Datagrams one endpoint of one shard keeps waiting for its socket; a driver's send
    /// beyond it is dropped and counted (`DatagramStats::send_queue_full`). Default 4096.
    pub datagram_send_queue: usize,
    /// Datagrams other shards may queue for one shard (its connections' datagrams that the
    /// kernel's `SO_REUSEPORT` hash delivered elsewhere); beyond it they are dropped and
    /// counted (`DatagramStats::forward_dropped`). Default 4096.
    pub datagram_forward_queue: usize,
    /// The largest datagram received (bytes); longer ones are dropped. Default 2048 (QUIC
    /// needs 1200 and rarely sees more than 1500).
    pub datagram_max_size: usize,
    /// Receive offload (`UDP_GRO`, Linux 5.0+, best effort): the kernel joins a peer's
    /// datagrams into one receive of up to 64 KiB (each receive buffer then takes 64 KiB).
    /// Default `false`.
    pub datagram_gro: bool,
    /// `SO_RCVBUF` and `SO_SNDBUF` of every datagram socket, in bytes (the kernel caps it at
    /// `net.core.rmem_max` / `wmem_max`; 0 keeps its default of about 200 KiB, which a burst
    /// of a few hundred handshakes overflows). Default 4 MiB.
    pub datagram_socket_buffer: usize,
    /// Send offload (`UDP_SEGMENT`, Linux 4.18+): a driver's train of equal datagrams leaves
    /// as one send when the kernel takes it. Default `true`.
    pub datagram_gso: bool,
    /// io_uring: one multishot `RECVMSG` per datagram socket into a provided-buffer ring of
    /// [`Self::datagram_recv_buffers`] (Linux 6.0+; on an older kernel, or with `false`, the
    /// single-shot receives of [`Self::datagram_recv_depth`]). Default `true`.
    pub datagram_recv_multishot: bool,
    /// io_uring, multishot: provided buffers for the shard's datagram sockets (power of two,
    /// at most 32768), the most offered at once (the offer follows the traffic). Default 256.
    pub datagram_recv_buffers: u16,
    /// io_uring, single-shot: receives armed per datagram socket (each with its own buffer).
    /// Default 16.
    pub datagram_recv_depth: usize,
    /// io_uring: sends in flight per datagram socket; the rest wait in the send queue.
    /// Default 64.
    pub datagram_sends_in_flight: usize,
    /// epoll: datagrams read from one socket per turn before the turn moves on (fairness;
    /// the rest next turn). Default 256.
    pub datagram_recv_budget: usize,
    /// Input fences (`ShardCtx::input_fence`): every shard numbers the looks at the kernel
    /// that take everything pending, so that a handler can wait until every other shard has
    /// handled what reached it before a moment. Costs a few atomics per turn and per blocking
    /// wait, drains (io_uring: enters until one comes short) when another shard waits, and a
    /// `pread` of a sleeping shard's `/proc` stat per fence. Without it a fence passes at once.
    /// Default `false`.
    pub input_fences: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            shards: None,
            pin_threads: true,
            unpin_when_shared: true,
            sched_slice: None,
            listen: Vec::new(),
            listen_backlog: 1024,
            backend: BackendChoice::Auto,
            ring_entries: 4096,
            completion_entries: 16384,
            recv_buffers: 512,
            recv_buffer_size: 16 * 1024,
            epoll_read_budget: 256 * 1024,
            max_iovecs: 1024,
            zerocopy_threshold: None,
            coalesce_below: 512,
            spare_send_queues: 512,
            write_interval: Duration::ZERO,
            write_pacing: WritePacing::Adaptive,
            write_batch_bytes: 64 * 1024,
            timer_tick: Duration::from_millis(1),
            mailbox_batches: 4096,
            max_pending_posts: 65536,
            mailbox_retry: Duration::from_micros(200),
            drain_timeout: Duration::from_secs(5),
            accept_batch: 256,
            accept_backoff: Duration::from_millis(100),
            cancel_timeout: Duration::from_secs(1),
            clock: Clock::System,
            inherited: crate::sys::handover::InheritedListeners::default(),
            datagram_listen: Vec::new(),
            datagram_clients: Vec::new(),
            datagram_send_queue: 4096,
            datagram_forward_queue: 4096,
            datagram_max_size: 2048,
            datagram_gro: false,
            datagram_socket_buffer: 4 << 20,
            datagram_gso: true,
            datagram_recv_multishot: true,
            datagram_recv_buffers: 256,
            datagram_recv_depth: 16,
            datagram_sends_in_flight: 64,
            datagram_recv_budget: 256,
            input_fences: false,
        }
    }
}

impl RuntimeConfig {
    /// The shard count this config resolves to on this machine.
    pub fn shard_count(&self) -> usize {
        self.shards.unwrap_or_else(available_cores).max(1)
    }

    /// The endpoint index (for [`crate::ShardCtx::connect_datagram`]) of
    /// [`Self::datagram_clients`]`[client]`: the listen endpoints come first.
    pub fn datagram_client_endpoint(&self, client: usize) -> usize {
        self.datagram_listen.len() + client
    }

    /// Whether shards keep the input-fence board (asked for, and more than one shard).
    pub(crate) fn fences_input(&self) -> bool {
        self.input_fences && self.shard_count() > 1
    }

    /// Whether any datagram endpoint (listening or client) is configured.
    pub(crate) fn has_datagram_endpoints(&self) -> bool {
        !self.datagram_listen.is_empty() || !self.datagram_clients.is_empty()
    }

    /// Bytes of one datagram receive buffer: 64 KiB with GRO (a joined train), else
    /// [`Self::datagram_max_size`].
    pub(crate) fn datagram_recv_size(&self) -> usize {
        if self.datagram_gro {
            usize::from(u16::MAX)
        } else {
            self.datagram_max_size
        }
    }

    /// Checks every field, naming the bad key.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let bad = |key: &'static str, reason: &str| Err(invalid(key, reason));
        if self.shards == Some(0) {
            return bad("shards", "must be at least 1");
        }
        if self.shard_count() > usize::from(u16::MAX) {
            return bad("shards", "at most 65535");
        }
        if !self.ring_entries.is_power_of_two() {
            return bad("ring_entries", "must be a power of two");
        }
        if self.completion_entries < self.ring_entries || !self.completion_entries.is_power_of_two()
        {
            return bad("completion_entries", "power of two >= ring_entries");
        }
        if !self.recv_buffers.is_power_of_two() || self.recv_buffers > 32768 {
            return bad("recv_buffers", "power of two, at most 32768");
        }
        if self.recv_buffer_size == 0 {
            return bad("recv_buffer_size", "must be positive");
        }
        if self.max_iovecs == 0 || self.max_iovecs > 1024 {
            return bad("max_iovecs", "between 1 and 1024 (IOV_MAX)");
        }
        if self.write_interval > Duration::from_secs(1) {
            return bad("write_interval", "at most 1 s");
        }
        if self.sched_slice.is_some_and(|slice| {
            slice < Duration::from_micros(100) || slice > Duration::from_millis(100)
        }) {
            return bad(
                "sched_slice",
                "between 100 µs and 100 ms (the kernel's range)",
            );
        }
        if self.timer_tick.is_zero() {
            return bad("timer_tick", "must be positive");
        }
        if self.mailbox_batches == 0 || self.max_pending_posts == 0 {
            return bad("mailbox_batches", "mailbox bounds must be positive");
        }
        if self.accept_batch == 0 || self.epoll_read_budget == 0 || self.listen_backlog <= 0 {
            return bad(
                "accept_batch",
                "accept_batch, epoll_read_budget, backlog positive",
            );
        }
        if self.accept_backoff.is_zero() || self.accept_backoff > Duration::from_secs(60) {
            return bad("accept_backoff", "between 1 ms and 60 s");
        }
        if self.cancel_timeout.is_zero() {
            return bad("cancel_timeout", "must be positive");
        }
        self.validate_datagrams()
    }

    fn validate_datagrams(&self) -> Result<(), RuntimeError> {
        let bad = |key: &'static str, reason: &str| Err(invalid(key, reason));
        let positive = [
            ("datagram_send_queue", self.datagram_send_queue),
            ("datagram_forward_queue", self.datagram_forward_queue),
            ("datagram_recv_depth", self.datagram_recv_depth),
            ("datagram_sends_in_flight", self.datagram_sends_in_flight),
            ("datagram_recv_budget", self.datagram_recv_budget),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return bad(key, "must be positive");
        }
        if !self.datagram_recv_buffers.is_power_of_two() || self.datagram_recv_buffers > 32768 {
            return bad("datagram_recv_buffers", "power of two, at most 32768");
        }
        if !(1200..=65535).contains(&self.datagram_max_size) {
            return bad(
                "datagram_max_size",
                "between 1200 (QUIC's minimum) and 65535",
            );
        }
        Ok(())
    }
}

/// The error naming a bad config key.
fn invalid(key: &'static str, reason: &str) -> RuntimeError {
    RuntimeError::InvalidConfig {
        key,
        reason: reason.to_owned(),
    }
}

/// Cores this process may run on (`available_parallelism`), at least 1.
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_valid() {
        RuntimeConfig::default().validate().unwrap();
        assert!(RuntimeConfig::default().shard_count() >= 1);
    }

    #[test]
    fn validate_names_the_bad_key() {
        let config = RuntimeConfig {
            recv_buffers: 100,
            ..RuntimeConfig::default()
        };
        match config.validate() {
            Err(RuntimeError::InvalidConfig { key, .. }) => assert_eq!(key, "recv_buffers"),
            other => panic!("unexpected {other:?}"),
        }
        let zero = RuntimeConfig {
            shards: Some(0),
            ..RuntimeConfig::default()
        };
        assert!(zero.validate().is_err());
    }

    #[test]
    fn a_scheduler_slice_outside_the_kernels_range_is_refused() {
        let with = |slice| RuntimeConfig {
            sched_slice: Some(slice),
            ..RuntimeConfig::default()
        };
        for bad in [Duration::from_micros(99), Duration::from_millis(101)] {
            match with(bad).validate() {
                Err(RuntimeError::InvalidConfig { key, .. }) => assert_eq!(key, "sched_slice"),
                other => panic!("{bad:?}: unexpected {other:?}"),
            }
        }
        for good in [Duration::from_micros(100), Duration::from_millis(100)] {
            with(good).validate().unwrap();
        }
    }

    #[test]
    fn kernel_backlog_is_positive() {
        assert!(crate::kernel_max_listen_backlog() > 0);
    }

    #[test]
    fn backend_names_parse() {
        assert_eq!(BackendChoice::parse("EPOLL").unwrap(), BackendChoice::Epoll);
        assert_eq!(
            BackendChoice::parse("io_uring").unwrap(),
            BackendChoice::Uring
        );
        assert_eq!(BackendChoice::parse("auto").unwrap(), BackendChoice::Auto);
        assert!(BackendChoice::parse("kqueue").is_err());
    }
}
