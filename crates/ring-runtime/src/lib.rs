//! Thread-per-core reactors on io_uring with an epoll fallback.
//!
//! Knows nothing about MQTT: a protocol handler ([`Handler`]) plugs into each shard. Start
//! with [`Runtime::start`]; each shard runs one pinned thread with its own listener
//! (`SO_REUSEPORT`), its own connections, timer wheel and mailbox. Everything a handler does
//! goes through its [`ShardCtx`].

mod backend;
mod backend_select;
mod clock;
mod close_reason;
mod config;
mod conn;
mod ctx;
mod ctx_fences;
mod ctx_flow;
mod datagram;
mod epoll;
mod error;
mod exit;
mod expired_timers;
mod fence;
mod handler;
mod ids;
mod layer;
mod mailbox;
#[cfg(all(test, loom))]
mod mailbox_loom;
mod quiet;
mod runtime;
mod send_queue;
mod shard;
mod shared;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
mod slab;
mod sys;
mod timer;
mod uring;

pub use clock::{Clock, ManualClock};
pub use config::{
    BACKEND_ENV, BackendChoice, BackendKind, RuntimeConfig, WritePacing, available_cores,
};
pub use conn::ConnMap;
pub use ctx::{ShardCtx, ShardStats};
pub use datagram::{
    Datagram, DatagramDriver, DatagramListen, DatagramStats, DriverClose, DriverFactory, DriverIo,
    DriverSetup, PeerIdentity,
};
pub use error::{PostRejected, RuntimeError};
pub use exit::{ExitCause, ShardExit, ShardExits};
pub use fence::{FenceMarks, INPUT_FENCE_PATIENCE, InputFence, InputStamp};
pub use handler::{CloseReason, Handler};
pub use ids::{ConnId, ShardId, TimerId};
pub use layer::{LayerError, LayerOutput, LayerState, StreamLayer};
pub use runtime::{Poster, Runtime, RuntimeControl, RuntimeHandle};
pub use sys::alloc::{hold_free_memory, return_free_memory};
pub use sys::handover::{InheritedListeners, receive_listeners, send_listeners};
pub use sys::rss::resident_memory_bytes;
pub use sys::socket::kernel_max_listen_backlog;
pub use sys::thread::raise_fd_limit;
