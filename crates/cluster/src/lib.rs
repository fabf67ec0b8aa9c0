//! The cluster link (`[cluster]`, docs/cluster.md): RingMQ nodes exchange messages over NATS.
//!
//! One thread per node runs a NATS client on a small single-threaded tokio runtime
//! ([`link`]); no reactor ever touches the network for it. The shards talk to it through
//! [`ClusterLink`]:
//! - outbound: every PUBLISH accepted from a local client (not one that came from NATS) is
//!   one `try_send` of its shared [`Message`] into a bounded queue; a full queue drops it,
//!   counted;
//! - interest: shard 0 reports each subscription its replica adds or removes (in the total
//!   order of the replicated table); the link counts references per filter and holds one
//!   NATS subscription per subject while the count is above zero ([`interest`]);
//! - inbound: messages NATS delivers are posted to a shard (chosen by the topic, so one
//!   topic's messages keep their order) as [`ClusterInbound::Publish`], which routes them to local
//!   subscribers only.
//!
//! This crate is the only one with tokio and async-nats. It knows the broker through
//! `broker_api` alone: the shared [`Message`](broker_api::Message), the questions and answers
//! of `broker_api::cluster`, and the [`ClusterInbox`] it posts into.

#![forbid(unsafe_code)]

mod acks;
mod alive;
mod arrivals;
mod buckets;
mod claiming;
mod counters;
mod dead_owner;
mod follow_up;
mod handle;
mod headers;
mod inbound;
mod inbound_drain;
mod interest;
mod interest_queue;
mod journal;
mod journal_read;
mod journal_writer;
mod lifecycle;
mod link;
mod link_state;
mod live_keys;
mod losses;
mod mirror;
mod mirror_queue;
mod missed;
mod outbound;
mod overlap;
mod owner_record;
mod owners;
mod ownership;
mod port;
mod read_back;
mod release_serving;
mod release_wire;
mod released;
mod released_copy;
mod reliable;
mod replays;
mod restart;
mod retained;
mod retained_pending;
pub mod retained_value;
mod retained_write_back;
mod retained_writer;
mod retried;
pub mod settings;
mod settled;
mod stream_read;
pub mod subject;
pub mod totals;

pub use broker_api::cluster::{
    ClaimRequest, ClusterPublish, MirrorOp, Ownership, OwnershipAnswer, ReleaseRequest, Scope,
};
pub use counters::{ClusterCounters, ClusterFigures};
pub(crate) use handle::Outbound;
pub use handle::{ClusterLink, ClusterQueues};
pub(crate) use interest_queue::Interest;
pub use link::ClusterThread;
pub use settled::Settled;

use std::sync::Arc;

#[cfg(doc)]
use broker_api::ClusterInbound;
use broker_api::ClusterInbox;

/// The shards' mailboxes, where the link posts what it receives.
pub type Inbox = Arc<dyn ClusterInbox>;
