//! The session model and its protocol state, in memory: [`Session`] (subscriptions, inflight
//! QoS 1/2 window, offline queue, inbound QoS 2 ids, will, expiry) and [`Sessions`] (one shard's
//! sessions by client id and by subscriber key). The session is generic over the broker's own
//! types ([`SessionTypes`]), so this crate depends on neither the router nor the runtime.
//! Persistence sits behind the [`storage::SessionStorage`] trait: the broker will describe each
//! durable change as a [`storage::SessionWrite`]. Engines: memory only ([`storage::NoStorage`]),
//! the model ([`storage::RecordingStorage`]) and the durable [`storage::SledStorage`] and
//! [`storage::RedbStorage`]; the broker does not call them yet (the module docs list where it
//! will).
#![forbid(unsafe_code)]

mod budget;
mod inbound;
mod inflight;
mod lazy;
mod queue;
mod session;
mod sessions;
pub mod storage;

pub use budget::ByteBudget;
pub use inbound::{AwaitingRelease, InboundQos2};
pub use inflight::{AckError, InflightState, InflightWindow};
pub use queue::{MessageQueue, OverflowPolicy, Pushed, QueueLimits, Weighed};
pub use session::{
    PendingWill, Session, SessionExpiry, SessionSubscription, SessionTimers, SessionTypes,
    SpilledQueue, SubscriptionList,
};
pub use sessions::Sessions;
pub use storage::{Committed, Skipped, SyncMode};
