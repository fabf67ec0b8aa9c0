//! How this node writes a retained record to the bucket (docs/cluster.md, "Retained
//! messages"): its layout (`retained_value.rs`) and one JetStream publish with a
//! `Nats-Msg-Id` (the bucket's duplicate window drops a copy written again after the first
//! landed), to be awaited and made again by `acks::keep`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use async_nats::HeaderMap;
use async_nats::header::NATS_MESSAGE_ID;
use async_nats::jetstream::{self, kv};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::acks::Attempt;
use super::link_state::Link;
use super::retained_value::{RetainedRecord, key_of};
use broker_api::{Expiry, Message};

/// Writes to the bucket whose acknowledgement is awaited at once.
pub(super) const MAX_WRITES_IN_FLIGHT: usize = 1024;

/// A local retained publish (an empty payload clears) for the bucket.
pub(super) struct RetainedWrite {
    pub(super) message: Arc<Message>,
    /// Written again while JetStream does not acknowledge it, until then
    /// (`cluster.ack_timeout_ms` after the shard handed the message over).
    pub(super) deadline: Instant,
    /// Told whether the bucket kept the record: the publishers whose acknowledgement waits for
    /// it (`acks.rs`), and for those of the writes it replaced while queued (`coalesced`).
    pub(super) kept: Vec<oneshot::Sender<bool>>,
}

/// `first` and the writes queued behind it (at most `room` in all), each topic's last one
/// only: a record replaced by a newer one of its topic before it was sent is never written
/// (the bucket keeps one record per topic), and its waiting publishers are told what becomes
/// of the newer one, within the earlier deadline. The writes leave in the order of their
/// topic's last write.
pub(super) fn coalesced(
    first: RetainedWrite,
    queued: &mut mpsc::Receiver<RetainedWrite>,
    room: usize,
) -> Vec<RetainedWrite> {
    let mut writes: Vec<Option<RetainedWrite>> = Vec::new();
    let mut last_of: HashMap<Arc<str>, usize> = HashMap::new();
    let mut next = Some(first);
    while let Some(mut write) = next {
        let topic: Arc<str> = Arc::from(write.message.publish.topic().as_str());
        if let Some(replaced) = last_of.get(&topic).and_then(|&at| writes[at].take()) {
            write.deadline = write.deadline.min(replaced.deadline);
            write.kept.extend(replaced.kept);
        }
        last_of.insert(topic, writes.len());
        writes.push(Some(write));
        next = match last_of.len() < room {
            true => queued.try_recv().ok(),
            false => None,
        };
    }
    writes.into_iter().flatten().collect()
}

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn write(topic: &str, payload: &'static [u8], deadline: Instant) -> RetainedWrite {
        let publish = codec::SharedPublish::new(
            codec::MqttStr::try_from(topic).unwrap(),
            bytes::Bytes::from_static(payload),
            &codec::PublishProperties::default(),
        )
        .unwrap();
        let message = Arc::new(Message {
            publish,
            qos: codec::QoS::AtLeastOnce,
            retain: true,
            expires_at: None,
            received_ns: 0,
            key: 0,
        });
        let (kept, _) = oneshot::channel();
        RetainedWrite {
            message,
            deadline,
            kept: vec![kept],
        }
    }

    fn shown(writes: &[RetainedWrite]) -> Vec<(String, usize)> {
        (writes.iter())
            .map(|w| {
                let payload = String::from_utf8(w.message.publish.payload().to_vec()).unwrap();
                (payload, w.kept.len())
            })
            .collect()
    }

    #[test]
    fn a_queued_record_replaced_by_a_newer_one_of_its_topic_is_not_written() {
        let (queue, mut queued) = mpsc::channel(8);
        let soon = Instant::now();
        let later = soon + Duration::from_secs(1);
        for (topic, payload) in [("b", &b"b1"[..]), ("a", b"a2"), ("c", b"c1"), ("a", b"a3")] {
            queue.try_send(write(topic, payload, later)).unwrap();
        }
        let writes = coalesced(write("a", b"a1", soon), &mut queued, 8);
        let want = [("b1", 1), ("c1", 1), ("a3", 3)];
        let want: Vec<(String, usize)> = want.iter().map(|(p, n)| ((*p).into(), *n)).collect();
        assert_eq!(
            shown(&writes),
            want,
            "each topic's last, its publishers waiting"
        );
        assert_eq!(writes[2].deadline, soon, "within the earliest deadline");
    }

    #[test]
    fn no_more_topics_are_taken_than_there_is_room_for() {
        let (queue, mut queued) = mpsc::channel(8);
        let now = Instant::now();
        for topic in ["b", "b", "c"] {
            queue.try_send(write(topic, b"x", now)).unwrap();
        }
        let writes = coalesced(write("a", b"x", now), &mut queued, 2);
        assert_eq!(writes.len(), 2);
        assert_eq!(
            queued.try_recv().unwrap().message.publish.topic().as_str(),
            "b"
        );
    }
}
