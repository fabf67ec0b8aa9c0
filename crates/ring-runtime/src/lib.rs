//! Thread-per-core reactors on io_uring with an epoll fallback.
//!
//! Knows nothing about MQTT: a protocol handler plugs into each shard.

mod config;
mod error;
mod ids;
mod mailbox;
mod slab;
mod sys;
mod timer;

pub use config::{BACKEND_ENV, BackendChoice, BackendKind, RuntimeConfig, available_cores};
pub use error::{PostRejected, RuntimeError};
pub use ids::{ConnId, ShardId, TimerId};
