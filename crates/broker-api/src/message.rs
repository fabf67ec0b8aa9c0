//! One published [`Message`], encoded once and shared (by `Arc`) by every copy on every shard,
//! and its [`Expiry`].

use std::time::Instant;

use codec::{QoS, SharedPublish};

/// One published message, encoded once and shared (by `Arc`) by every recipient on every shard.
#[derive(Debug)]
pub struct Message {
    /// Topic, payload and the properties forwarded unchanged, encoded once.
    pub publish: SharedPublish,
    /// The QoS it was published with.
    pub qos: QoS,
    /// The RETAIN flag it was published with.
    pub retain: bool,
    /// When its Message Expiry Interval runs out, if it has one.
    pub expires_at: Option<Instant>,
    /// The turn it was received in: the receiving shard's `ShardCtx::now`, in nanoseconds
    /// since the broker started, for the delivery latency; 0 for a message read back from the
    /// store (not measured).
    pub received_ns: u64,
    /// Its identity across the cluster (docs/cluster.md, "Exactly once across a node's
    /// death"): drawn by the shard that received it from a client, carried by NATS with it,
    /// written with each QoS 2 delivery to the delivery journal, and stored with a session's
    /// queued and inflight copies; 0 on a single node, for a retained or delayed message read
    /// back from a store, and for a copy stored by an earlier version.
    pub key: u64,
}

/// How long a message still lives, for forwarding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// It has no expiry interval.
    Never,
    /// Whole seconds left (forwarded as the new Message Expiry Interval).
    Remaining(u32),
    /// It has expired: never deliver it.
    Expired,
}

impl Message {
    /// The expiry state at `now`.
    pub fn expiry(&self, now: Instant) -> Expiry {
        match self.expires_at {
            None => Expiry::Never,
            Some(at) if at <= now => Expiry::Expired,
            Some(at) => {
                let secs = at.duration_since(now).as_secs_f64().ceil();
                Expiry::Remaining(u32::try_from(secs as u64).unwrap_or(u32::MAX).max(1))
            }
        }
    }
}
