//! [`Link`]: what the cluster thread's loops share (the two NATS clients, the subject prefix,
//! this node run's origin, the counters, the clock and the replays).

use std::sync::Arc;

use std::time::{Duration, Instant};

use async_nats::Client;
use async_nats::connection::State;
use ring_runtime::Clock;

use super::ClusterCounters;
use super::replays::Replays;

/// How often a loop waiting for NATS looks at the connection.
const CONNECTED_POLL: Duration = Duration::from_millis(50);

/// Whether two node runs (`<node_id>/<nonce>`) are runs of the same node.
pub(super) fn same_node(a: &str, b: &str) -> bool {
    a.split('/').next() == b.split('/').next()
}

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
    /// `cluster.ack_timeout_ms`: how long a QoS 1/2 message is published again until JetStream
    /// keeps it (`acks.rs`).
    pub(super) ack_timeout: std::time::Duration,
    /// Set once the retained bucket is open (`retained.rs`): from then on a retained QoS 1/2
    /// publisher's acknowledgement waits for the bucket too.
    pub(super) retained_bucket: std::sync::OnceLock<()>,
}

impl Link {
    /// Whether the retained bucket is open.
    pub(super) fn retained_open(&self) -> bool {
        self.retained_bucket.get().is_some()
    }

    /// Returns once the main NATS connection is up.
    pub(super) async fn wait_connected(&self) {
        while self.client.connection_state() != State::Connected {
            tokio::time::sleep(CONNECTED_POLL).await;
        }
    }

    /// Returns once the main NATS connection is up (`true`), or at `deadline` (`false`).
    pub(super) async fn wait_connected_until(&self, deadline: Instant) -> bool {
        loop {
            if Instant::now() >= deadline {
                return false;
            }
            if self.client.connection_state() == State::Connected {
                return true;
            }
            tokio::time::sleep(CONNECTED_POLL).await;
        }
    }
}
