//! The session model and its protocol state, in memory: [`Session`] (subscriptions, inflight
//! QoS 1/2 window, offline queue, inbound QoS 2 ids, will, expiry) and [`Sessions`] (one shard's
//! sessions by client id and by subscriber key). The session is generic over the broker's own
//! types ([`SessionTypes`]), so this crate depends on neither the router nor the runtime.
//! Persistence sits behind the [`storage::SessionStorage`] trait: the broker describes each
//! durable change as a [`storage::SessionWrite`] and commits them from its store thread.
//! Engines: memory only ([`storage::NoStorage`]), the model ([`storage::RecordingStorage`]) and
//! the durable [`storage::LoggedStorage`] (a log checkpointed into redb: the broker's default,
//! `persistence.engine = "log"` in `configs/default.toml`), [`storage::RedbStorage`] and
//! [`storage::SledStorage`] (the module docs list where the broker emits each write).
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
pub use sessions::{Located, Sessions};
pub use storage::{Committed, Skipped, SyncMode};
