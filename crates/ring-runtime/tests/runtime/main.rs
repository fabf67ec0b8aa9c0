//! Public-API tests of ring-runtime over real loopback sockets. The backend comes from
//! `RINGMQ_BACKEND` (auto when unset), so scripts/test.d/30-runtime.sh runs this binary once
//! per backend. A test that needs something the kernel lacks prints why and skips.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

mod accept;
mod buffers;
mod close;
mod connect;
mod datagram;
mod datagram_connect;
mod echo;
mod fairness;
mod fence;
mod large;
mod layer;
mod mailbox;
mod pacing;
mod panic;
mod pause;
mod shutdown;
mod timers;
mod toy_datagram;
mod toy_datagram_client;
mod unpin;
mod write_hold;
