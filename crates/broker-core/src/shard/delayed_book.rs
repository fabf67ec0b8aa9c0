//! A shard's pending delayed messages (`$delayed/`, `delayed.rs` fires and cancels them):
//! each message, when it was received on the shard's clock, and its timer; by id.

use std::collections::BTreeMap;
use std::time::Instant;

use bytes::Bytes;
use codec::{MqttStr, PublishProperties, QoS};

use super::timer_book::ArmedTimer;
use crate::admin_query::DelayedInfo;

/// A delayed message as the broker keeps it until it fires.
#[derive(Debug, Clone)]
pub struct DelayedMessage {
    /// Where it is published.
    pub topic: MqttStr,
    pub payload: Bytes,
    pub qos: QoS,
    pub retain: bool,
    /// The PUBLISH's 5.0 properties (its Message Expiry Interval counts from receipt).
    pub properties: PublishProperties,
    /// The client that published it.
    pub publisher: MqttStr,
    /// When it is due, in Unix milliseconds (for the admin API).
    pub due_unix_ms: u64,
}

/// One pending message, its receipt time on the shard's clock and its timer.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) message: DelayedMessage,
    pub(super) received: Instant,
    pub(super) timer: ArmedTimer,
}

/// This shard's pending delayed messages, by id.
#[derive(Debug, Default)]
pub struct DelayedBook {
    pub(super) pending: BTreeMap<u64, Pending>,
}

impl DelayedBook {
    /// At most `limit` pending messages with an id after `after`, by id.
    pub(super) fn page(&self, after: Option<u64>, limit: usize) -> Vec<DelayedInfo> {
        let start = after.map_or(0, |id| id.saturating_add(1));
        (self.pending.range(start..).take(limit))
            .map(|(id, pending)| info(*id, &pending.message))
            .collect()
    }
}

fn info(id: u64, message: &DelayedMessage) -> DelayedInfo {
    DelayedInfo {
        id,
        topic: message.topic.as_str().to_owned(),
        qos: message.qos as u8,
        retain: message.retain,
        due_unix_ms: message.due_unix_ms,
        payload_bytes: message.payload.len(),
        publisher: message.publisher.as_str().to_owned(),
    }
}
