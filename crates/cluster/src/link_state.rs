//! [`Link`]: what the cluster thread's loops share (the two NATS clients, the subject prefix,
//! this node run's origin, the counters, the clock and the replays).

use std::sync::Arc;

use async_nats::Client;
use ring_runtime::Clock;

use super::ClusterCounters;
use super::replays::Replays;

/// What the loops share.
pub(super) struct Link {
    /// Publishes, plain subscriptions and the buckets; `no_echo`, so NATS never delivers
    /// this node's publishes back to its plain subscriptions.
    pub(super) client: Client,
    /// Queue (shared) subscriptions only, with echo: this node's members then take part in
    /// NATS's choice of one member for the node's own publishes too.
    pub(super) queue_client: Client,
    pub(super) prefix: String,
    /// `<node_id>/<start nonce>`: this node in this run.
    pub(super) origin: String,
    pub(super) counters: Arc<ClusterCounters>,
    pub(super) clock: Clock,
    /// QoS 1/2 kept for replays (`reliable.rs`).
    pub(super) replays: Arc<Replays>,
}
