//! Sessions' protocol state: inflight QoS 1/2 windows, offline queues and inbound QoS 2 ids (in
//! memory today; durable storage engines come later).
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
