//! How this node writes a retained record to the bucket (docs/cluster.md, "Retained
//! messages"): its layout (`retained_value.rs`) and one JetStream publish with a
//! `Nats-Msg-Id` (the bucket's duplicate window drops a copy written again after the first
//! landed), to be awaited and made again by `acks::keep`.

use std::time::Instant;

use async_nats::HeaderMap;
use async_nats::header::NATS_MESSAGE_ID;
use async_nats::jetstream::{self, kv};
use tracing::debug;

use super::acks::Attempt;
use super::link_state::Link;
use super::retained_value::{RetainedRecord, key_of};
use broker_api::{Expiry, Message};

/// Writes to the bucket whose acknowledgement is awaited at once.
pub(super) const MAX_WRITES_IN_FLIGHT: usize = 1024;

/// This node run's writer of the bucket.
pub(super) struct BucketWriter {
    /// `<node_id>/<nonce>`: recorded in every record.
    pub(super) origin: String,
    /// The subject a key's record is published on, before the key.
    subject_prefix: String,
    clock: ring_runtime::Clock,
    /// The writes so far: each write's `Nats-Msg-Id`.
    written: u64,
}

impl BucketWriter {
    pub(super) fn new(link: &Link, store: &kv::Store) -> Self {
        Self {
            origin: link.origin.clone(),
            subject_prefix: store.put_prefix.clone().unwrap_or(store.prefix.clone()),
            clock: link.clock.clone(),
            written: 0,
        }
    }

    /// Publishes `record` as `topic`'s bucket entry once; the attempt to await (its
    /// acknowledgement, or `None` when the publish itself failed: made again).
    pub(super) async fn first_attempt(
        &mut self,
        js: &jetstream::Context,
        topic: &str,
        record: &RetainedRecord,
        deadline: Instant,
    ) -> Attempt {
        let subject =
            async_nats::Subject::from(format!("{}{}", self.subject_prefix, key_of(topic)));
        self.written += 1;
        let number = self.written;
        let mut headers = HeaderMap::new();
        headers.insert(
            NATS_MESSAGE_ID,
            format!("{}:r{number}", self.origin).as_str(),
        );
        let payload = record.encode();
        let published = js
            .publish_with_headers(subject.clone(), headers.clone(), payload.clone())
            .await;
        let ack = published
            .inspect_err(|e| debug!(error = %e, "cluster: retained write not sent; made again"))
            .ok();
        Attempt {
            subject,
            headers,
            payload,
            ack,
            deadline,
        }
    }

    /// The record of a local retained publish (an expired one becomes a clear).
    pub(super) fn record(&self, message: &Message) -> RetainedRecord {
        let now = self.clock.now();
        let (expires_unix, payload) = match message.expiry(now) {
            Expiry::Never => (None, message.publish.payload().clone()),
            Expiry::Remaining(secs) => (
                Some(unix_now() + u64::from(secs)),
                message.publish.payload().clone(),
            ),
            Expiry::Expired => (None, bytes::Bytes::new()),
        };
        RetainedRecord {
            origin: self.origin.clone(),
            qos: message.qos,
            expires_unix,
            properties: message.publish.shared_properties().clone(),
            payload,
        }
    }
}

/// Seconds since the Unix epoch (record expiry is wall-clock: it must mean the same on every
/// node and across restarts).
pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
