//! Topic names and filters, the subscription table, shared subscriptions and retained matching.
//!
//! Pure and deterministic: no I/O, no clock, no locks on the match path.
#![forbid(unsafe_code)]

mod error;
mod filter;
mod topic;

pub use error::{ReplicationError, TopicError};
pub use filter::{SHARE_PREFIX, SharedFilter, SubscriptionFilter, TopicFilter};
pub use topic::{Levels, PROTOCOL_MAX_TOPIC_LENGTH, TopicLimits, TopicName};
