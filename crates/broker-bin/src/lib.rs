//! `ringmq`: the broker binary's library. It parses the configuration (`config`), composes the
//! core (the `broker-core` crate: shards and what they share) with the transports, access
//! control, the cluster link, the bridges and the operations listener ([`Broker::start`]),
//! and applies reloads (`reload`). ARCHITECTURE.md follows one PUBLISH through the crates.
#![forbid(unsafe_code)]

/// The admin API (its own crate).
pub use admin;
mod broker;
pub mod cli;
pub mod config;
#[cfg(debug_assertions)]
pub mod fault_injection;
pub mod logging;
pub mod ops_port;

/// The operations HTTP listener (`/metrics`, health, the admin API).
pub use ::ops;
pub mod reload;
mod runtime_settings;
pub mod scram_tool;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod store_tool;
pub mod upgrade;

/// TLS and WebSocket listeners (the `transport` crate), under their old path.
pub use ::transport;
/// The core's modules under their old paths (`ringmq::shard`, `ringmq::message`, ...).
pub use broker_core::{
    alias, auth, conn, detach, directory, guard, message, metrics, session, settings, shard,
    shared, shared_parts, store,
};

/// Loopback ports for servers the unit tests start (shared with the `broker` integration tests).
#[cfg(test)]
#[path = "../../../tests/broker/ports.rs"]
mod test_ports;

pub use broker::{Broker, StartError};
pub use reload::ReloadReport;
