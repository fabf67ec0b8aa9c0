//! The RingMQ broker: composes `codec`, `router`, `session-store` and `ring-runtime`.
#![forbid(unsafe_code)]

pub mod cli;
pub mod config;
