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
//!   topic's messages keep their order) as [`ShardMsg::Cluster`], which routes them to local
//!   subscribers only.

mod buckets;
mod claiming;
mod counters;
mod handle;
mod headers;
mod inbound;
mod interest;
mod lifecycle;
mod link;
mod mirror;
mod outbound;
mod ownership;
mod port;
mod reliable;
mod retained;
pub mod retained_value;
mod settled;
pub mod subject;
pub mod totals;

pub use counters::{ClusterCounters, ClusterFigures};
pub use handle::{ClusterLink, ClusterQueues};
pub(crate) use handle::{Interest, Outbound};
pub use link::ClusterThread;
pub(crate) use port::{ClaimRequest, MirrorOp};
pub use port::{ClusterPublish, Ownership, OwnershipAnswer, ReleaseRequest, Scope};
pub use settled::Settled;
