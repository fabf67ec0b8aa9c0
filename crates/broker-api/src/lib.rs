//! The thin interface between RingMQ's core and the features that plug into it (access,
//! bridges, the cluster link, the operations listener): the values they exchange, and nothing
//! of the shard's internals. Feature crates depend on this crate, never on the broker's core;
//! nothing here depends on another RingMQ crate but the protocol's own.
//!
//! - [`Secret`]: a credential from the configuration, kept out of `Debug` output.

#![forbid(unsafe_code)]

mod secret;

pub use secret::Secret;
