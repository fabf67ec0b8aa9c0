//! Topic names and filters, the subscription table, shared subscriptions and retained matching.
//!
//! Pure and deterministic: no I/O, no clock, no locks on the match path.
#![forbid(unsafe_code)]

mod error;
mod filter;
mod filter_match;
#[doc(hidden)]
pub mod fuzz_support;
mod index;
mod matches;
mod replication;
mod retained;
mod retained_order;
mod rewrite;
mod shared;
mod subscription;
mod table;
mod topic;
mod trie;

pub use error::TopicError;
pub use filter::{SHARE_PREFIX, SharedFilter, SubscriptionFilter, TopicFilter};
pub use filter_match::FilterMatcher;
pub use matches::{Delivery, Matches};
pub use replication::{
    ChangeOutcome, ChangeSeq, Received, ReorderBuffer, Replica, ReplicaConfig, Sequenced,
    Sequencer, SubscriptionChange,
};
pub use retained::{RetainedMatches, RetainedStore};
pub use retained_order::RetainedStep;
pub use rewrite::{RewriteAction, RewriteError, RewriteRule, TopicRewrite};
pub use shared::SharedStrategy;
pub use subscription::{SubscribeOutcome, SubscriberId, Subscription};
pub use table::{Publisher, SubscriptionTable, TableConfig, TableStats};
pub use topic::{Levels, PROTOCOL_MAX_TOPIC_LENGTH, TopicLimits, TopicName};

pub use codec::{QoS, RetainHandling, SubscriptionId, SubscriptionOptions};
