//! The RingMQ broker: composes `codec`, `router`, `session-store` and `ring-runtime`.
#![forbid(unsafe_code)]

pub mod alias;
pub mod cli;
pub mod config;
pub mod metrics;
