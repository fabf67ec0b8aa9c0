//! Sessions, inflight QoS 1/2 state, offline queues and retained durability behind a storage trait.
#![forbid(unsafe_code)]

mod budget;
mod inbound;
mod inflight;
mod lazy;
mod queue;

pub use budget::ByteBudget;
pub use inbound::{AwaitingRelease, InboundQos2};
pub use inflight::{AckError, InflightState, InflightWindow, Resend};
pub use queue::{MessageQueue, OverflowPolicy, Pushed, QueueLimits, Weighed};
