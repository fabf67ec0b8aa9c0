//! A shard's pending delayed messages (`$delayed/`; `delayed.rs` keeps, fires and cancels
//! them): each message as it will be published, its publisher, when it is due on the shard's
//! clock and its timer; by id. Also the recovered ones waiting for the shard to run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use codec::MqttStr;
use session_store::storage::StoredDelayed;

use super::timer_book::ArmedTimer;
use crate::admin_query::DelayedInfo;
use crate::message::Message;
use crate::store::instant_to_system;

/// One pending delayed message.
#[derive(Debug)]
pub(super) struct Pending {
    /// The message as it will be published (its topic the target; its expiry counts from
    /// receipt).
    pub(super) message: Arc<Message>,
    /// The client that published it.
    pub(super) publisher: MqttStr,
    pub(super) due: Instant,
    pub(super) timer: ArmedTimer,
}

/// This shard's pending delayed messages, by id.
#[derive(Debug, Default)]
pub struct DelayedBook {
    pub(super) pending: BTreeMap<u64, Pending>,
    /// Recovered from the store at start: armed once the shard runs (`resume_delayed`).
    pub(super) recovered: Vec<(u64, StoredDelayed)>,
}

impl DelayedBook {
    /// At most `limit` pending messages with an id after `after`, by id (`now`: the shard's
    /// clock, to tell the due time on the wall clock).
    pub(super) fn page(&self, after: Option<u64>, limit: usize, now: Instant) -> Vec<DelayedInfo> {
        let start = after.map_or(0, |id| id.saturating_add(1));
        (self.pending.range(start..).take(limit))
            .map(|(id, pending)| info(*id, pending, now))
            .collect()
    }
}

fn info(id: u64, pending: &Pending, now: Instant) -> DelayedInfo {
    let message = &pending.message;
    let due = instant_to_system(pending.due, now);
    let due_unix_ms = due
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    DelayedInfo {
        id,
        topic: message.publish.topic().as_str().to_owned(),
        qos: message.qos as u8,
        retain: message.retain,
        due_unix_ms: u64::try_from(due_unix_ms).unwrap_or(u64::MAX),
        payload_bytes: message.publish.payload().len(),
        publisher: pending.publisher.as_str().to_owned(),
    }
}
