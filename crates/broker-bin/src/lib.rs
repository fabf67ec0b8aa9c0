//! The RingMQ broker: composes `codec`, `router`, `session-store`, `transport` and `ring-runtime`.
//!
//! [`Broker::start`] runs one [`shard::BrokerShard`] per core on `ring-runtime`; ARCHITECTURE.md
//! follows one PUBLISH through these modules.
#![forbid(unsafe_code)]

mod abuse;
pub mod admin;
pub mod alias;
pub mod auth;
mod broker;
mod carry;
pub mod cli;
mod cluster_inbox;
pub mod config;
pub mod conn;
mod deal;
pub mod detach;
pub mod directory;
#[cfg(debug_assertions)]
pub mod fault_injection;
pub mod guard;
pub mod logging;
pub mod message;
pub mod metrics;
pub mod ops;
pub mod reload;
pub mod session;
pub mod settings;
pub mod shard;
pub mod shared;
pub mod shared_parts;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod store;
mod swap;
/// TLS and WebSocket listeners (the `transport` crate), under their old path.
pub use ::transport;

/// Loopback ports for servers the unit tests start (shared with the `broker` integration tests).
#[cfg(test)]
#[path = "../../../tests/broker/ports.rs"]
mod test_ports;

pub use broker::{Broker, StartError};
pub use reload::ReloadReport;
