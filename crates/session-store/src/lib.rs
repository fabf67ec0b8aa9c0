//! The session model and its protocol state, in memory: [`Session`] (subscriptions, inflight
//! QoS 1/2 window, offline queue, inbound QoS 2 ids, will, expiry) and [`Sessions`] (one shard's
//! sessions by client id and by subscriber key). The session is generic over the broker's own
//! types ([`SessionTypes`]), so this crate depends on neither the router nor the runtime.
//! Durable storage engines come later; nothing here persists anything yet.
#![forbid(unsafe_code)]

mod budget;
mod inbound;
mod inflight;
mod lazy;
mod queue;
mod session;
mod sessions;

pub use budget::ByteBudget;
pub use inbound::{AwaitingRelease, InboundQos2};
pub use inflight::{AckError, InflightState, InflightWindow, Resend};
pub use queue::{MessageQueue, OverflowPolicy, Pushed, QueueLimits, Weighed};
pub use session::{
    PendingWill, Session, SessionExpiry, SessionSubscription, SessionTimers, SessionTypes,
    SubscriptionList,
};
pub use sessions::Sessions;
