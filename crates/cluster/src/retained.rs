//! Retained messages cluster-wide (docs/cluster.md, "Retained messages"): a JetStream
//! key-value bucket holds each topic's last retained record; every node writes its local
//! retained publishes there and applies the bucket's entries, in the bucket's order, to its own
//! retained store (a cache of the bucket that serves its subscribers).
//!
//! Converging: the watch always delivers each topic's last record (a record the bucket replaced
//! before the watch got to it is skipped, never the last one), and a node applies what it
//! delivers, so every node ends with the bucket's last record per topic. While a node's own
//! write of a topic awaits JetStream's acknowledgement, entries for that topic are not applied
//! (they would replace the newer local message for a moment); if any was held back, the node
//! reads the topic's record once its last write is acknowledged and applies that.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::Inbox;
use async_nats::jetstream::{self, context::PublishAckFuture, kv};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt as _, StreamExt};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::buckets::{bucket_base, kv_stream, open_kv};
use super::inbound::post_publishes;
use super::link_state::Link;
use super::retained_value::{RetainedRecord, key_of, topic_of};
use super::{ClusterCounters, ClusterPublish};
use broker_api::{Expiry, Message};

/// Writes to the bucket whose acknowledgement is awaited at once.
const MAX_WRITES_IN_FLIGHT: usize = 1024;
/// Entries read from the watch before they are posted to the shards.
const ENTRY_BATCH: usize = 512;
/// Wait between attempts to open the bucket (JetStream not enabled or not ready yet).
const RETRY: Duration = Duration::from_secs(2);

/// Runs the retained sync: opens (or creates) the bucket, then writes the node's retained
/// publishes from `updates` and applies the bucket's entries until the thread stops.
pub(super) async fn retained(
    link: Arc<Link>,
    mut updates: mpsc::Receiver<Arc<Message>>,
    poster: Inbox,
    replicas: usize,
) {
    let js = jetstream::new(link.client.clone());
    let store = open_bucket(&js, &bucket_name(&link.prefix), replicas).await;
    let mut watch = loop {
        match store.watch_with_history(">").await {
            Ok(watch) => break watch,
            Err(e) => {
                warn!(error = %e, "cluster: retained bucket watch failed; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    };
    let mut sync = BucketSync::new(&link, &store);
    let mut acks = FuturesUnordered::new();
    loop {
        tokio::select! {
            Some(message) = updates.recv(), if acks.len() < MAX_WRITES_IN_FLIGHT => {
                match sync.write(&js, &message).await {
                    Ok(ack) => acks.push(ack),
                    // Not sent: the local value is not the bucket's; take the bucket's.
                    Err(topic) if sync.pending.failed(&topic) => {
                        let current = sync.read_back(&store, &topic).await;
                        post_publishes(&link.counters, &poster, current.into_iter().collect());
                    }
                    Err(_) => {}
                }
            }
            Some((topic, acked)) = acks.next(), if !acks.is_empty() => {
                if sync.acknowledged(&topic, acked.is_ok()) {
                    let current = sync.read_back(&store, &topic).await;
                    post_publishes(&link.counters, &poster, current.into_iter().collect());
                }
            }
            entry = watch.next() => {
                let Some(first) = entry else { break };
                let mut publishes = Vec::new();
                sync.apply(first, &mut publishes);
                while publishes.len() < ENTRY_BATCH {
                    match watch.next().now_or_never() {
                        Some(Some(entry)) => sync.apply(entry, &mut publishes),
                        _ => break,
                    }
                }
                post_publishes(&link.counters, &poster, publishes);
            }
        }
    }
    warn!("cluster: retained bucket watch ended");
}

/// The retained messages' bucket of the cluster with subject prefix `prefix`.
fn bucket_name(prefix: &str) -> String {
    format!("{}_retained", bucket_base(prefix))
}

/// The bucket, created if missing (one record per topic, file storage, `replicas` copies);
/// retried until JetStream answers.
async fn open_bucket(js: &jetstream::Context, bucket: &str, replicas: usize) -> kv::Store {
    let mut warned = false;
    loop {
        match open_kv(js, bucket, kv_stream(bucket, replicas, None)).await {
            Ok(store) => {
                info!(bucket, "cluster: retained messages bucket open");
                return store;
            }
            Err(e) if !warned => {
                warned = true;
                warn!(bucket, error = %e, "cluster: retained messages bucket not available (is JetStream enabled on the NATS servers?); retained messages stay on this node until it is");
            }
            Err(e) => debug!(bucket, error = %e, "cluster: retained bucket still not available"),
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// The node's side of the bucket: its identity, and its writes not yet seen in the watch.
struct BucketSync {
    origin: String,
    subject_prefix: String,
    counters: Arc<ClusterCounters>,
    clock: ring_runtime::Clock,
    pending: Pending,
}

/// A write's topic and its acknowledgement.
type Acked = (
    String,
    Result<jetstream::publish::PublishAck, jetstream::context::PublishError>,
);

impl BucketSync {
    fn new(link: &Link, store: &kv::Store) -> Self {
        Self {
            origin: link.origin.clone(),
            subject_prefix: store.put_prefix.clone().unwrap_or(store.prefix.clone()),
            counters: Arc::clone(&link.counters),
            clock: link.clock.clone(),
            pending: Pending::default(),
        }
    }

    /// Sends `message` (a local retained publish; an empty payload clears) to the bucket; the
    /// future of its acknowledgement.
    async fn write(
        &mut self,
        js: &jetstream::Context,
        message: &Message,
    ) -> Result<impl Future<Output = Acked> + use<>, String> {
        let topic = message.publish.topic().as_str().to_owned();
        let record = self.record(message);
        let subject = format!("{}{}", self.subject_prefix, key_of(&topic));
        match js.publish(subject, record.encode()).await {
            Ok(ack) => {
                self.pending.sent(&topic);
                ClusterCounters::add(&self.counters.retained_out, 1);
                Ok(acknowledged(topic, ack))
            }
            Err(e) => {
                debug!(error = %e, "cluster: retained write not sent");
                ClusterCounters::drop_one(
                    &self.counters.retained_failures,
                    "a retained message could not be written to the bucket",
                );
                Err(topic)
            }
        }
    }

    /// The record of a local retained publish (an expired one becomes a clear).
    fn record(&self, message: &Message) -> RetainedRecord {
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

    /// A write of `topic` was acknowledged (`stored`) or failed (counted); whether the
    /// topic's record is to be read back now: none of its writes awaits an acknowledgement any
    /// more, and entries were held back meanwhile or a write failed (the node's own value is
    /// then not the bucket's: without the read back it would keep it, unlike every other node).
    fn acknowledged(&mut self, topic: &str, stored: bool) -> bool {
        if !stored {
            ClusterCounters::drop_one(
                &self.counters.retained_failures,
                "the retained bucket refused a write",
            );
            self.pending.failed(topic);
        }
        self.pending.settle(topic)
    }

    /// The topic's record as the bucket has it now, for this node's store.
    async fn read_back(&mut self, store: &kv::Store, topic: &str) -> Option<ClusterPublish> {
        match store.entry(key_of(topic)).await {
            Ok(Some(entry)) => self.publish_of(entry),
            Ok(None) => None,
            Err(e) => {
                debug!(error = %e, "cluster: retained record not read back");
                None
            }
        }
    }

    /// Applies one watched entry: pushes what this node's retained store should take.
    fn apply(&mut self, entry: Result<kv::Entry, kv::WatcherError>, out: &mut Vec<ClusterPublish>) {
        match entry {
            Ok(entry) => out.extend(self.publish_of(entry)),
            Err(e) => debug!(error = %e, "cluster: retained watch error"),
        }
    }

    /// What this node's retained store takes of a bucket entry (nothing while held back, or
    /// when malformed: counted).
    fn publish_of(&mut self, entry: kv::Entry) -> Option<ClusterPublish> {
        // `$SYS` is each node's own: never taken from the bucket (no node writes it there).
        let topic = match topic_of(&entry.key) {
            Ok(topic) if !topic.as_str().starts_with("$SYS") => topic,
            _ => {
                let why = "a retained key is not a topic a node writes";
                ClusterCounters::drop_one(&self.counters.dropped_inbound, why);
                return None;
            }
        };
        let record = match entry.operation {
            kv::Operation::Put => match RetainedRecord::decode(entry.value) {
                Ok(record) => Some(record),
                Err(_) => {
                    let why = "a retained record is malformed";
                    ClusterCounters::drop_one(&self.counters.dropped_inbound, why);
                    return None;
                }
            },
            // Removed with other tools (`nats kv del`): a clear from nobody in particular.
            kv::Operation::Delete | kv::Operation::Purge => None,
        };
        if self.pending.holds_back(topic.as_str()) {
            return None;
        }
        let record = record.unwrap_or_else(|| cleared(&self.origin));
        ClusterCounters::add(&self.counters.retained_in, 1);
        Some(record.into_publish(topic, unix_now()))
    }
}

/// A record clearing a topic's retained message.
fn cleared(origin: &str) -> RetainedRecord {
    RetainedRecord {
        origin: origin.to_owned(),
        qos: codec::QoS::AtMostOnce,
        expires_unix: None,
        properties: bytes::Bytes::new(),
        payload: bytes::Bytes::new(),
    }
}

async fn acknowledged(topic: String, ack: PublishAckFuture) -> Acked {
    (topic, ack.await)
}

/// Seconds since the Unix epoch (record expiry is wall-clock: it must mean the same on every
/// node and across restarts).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Per topic, this node's writes to the bucket awaiting JetStream's acknowledgement, and
/// whether an entry was held back meanwhile (bounded by the writes in flight).
#[derive(Debug, Default)]
struct Pending {
    writes: HashMap<String, PendingTopic>,
}

#[derive(Debug, Default)]
struct PendingTopic {
    unacknowledged: u32,
    /// An entry was held back, or a write failed: the topic is read back once all settled.
    held_back: bool,
}

impl Pending {
    /// One more write of `topic` sent.
    fn sent(&mut self, topic: &str) {
        self.writes
            .entry(topic.to_owned())
            .or_default()
            .unacknowledged += 1;
    }

    /// One write of `topic` acknowledged or failed; whether that was the last one and an entry
    /// was held back meanwhile (the topic is to be read back).
    fn settle(&mut self, topic: &str) -> bool {
        let Some(pending) = self.writes.get_mut(topic) else {
            return false;
        };
        pending.unacknowledged = pending.unacknowledged.saturating_sub(1);
        if pending.unacknowledged > 0 {
            return false;
        }
        let held_back = pending.held_back;
        self.writes.remove(topic);
        held_back
    }

    /// A write of `topic` failed: whether nothing of ours is in flight for it (then the topic
    /// is to be read back now); otherwise it is read back once the writes in flight settle.
    fn failed(&mut self, topic: &str) -> bool {
        match self.writes.get_mut(topic) {
            Some(pending) => {
                pending.held_back = true;
                false
            }
            None => true,
        }
    }

    /// Whether an entry for `topic` waits (a write of ours awaits its acknowledgement): it is
    /// remembered, so the topic is read back once the write settles.
    fn holds_back(&mut self, topic: &str) -> bool {
        match self.writes.get_mut(topic) {
            Some(pending) => {
                pending.held_back = true;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_has_the_topic_read_back_once_its_writes_settle() {
        let mut pending = Pending::default();
        assert!(pending.failed("t"), "nothing in flight: read back now");
        pending.sent("t");
        pending.sent("t");
        assert!(!pending.failed("t"), "writes in flight: later");
        assert!(!pending.settle("t"));
        assert!(pending.settle("t"), "the last write settled: read back");
    }

    #[test]
    fn entries_wait_for_our_unacknowledged_writes_then_the_topic_is_read_back() {
        let mut pending = Pending::default();
        assert!(
            !pending.holds_back("t"),
            "nothing pending: an entry applies"
        );
        pending.sent("t");
        pending.sent("t");
        assert!(!pending.settle("t"), "nothing held back yet");
        assert!(
            pending.holds_back("t"),
            "a write awaits its acknowledgement"
        );
        assert!(
            pending.settle("t"),
            "the last write settled: read the topic back"
        );
        assert!(!pending.holds_back("t"), "nothing pending any more");
        pending.sent("u");
        assert!(!pending.settle("u"), "nothing was held back: no read");
        assert!(
            !pending.settle("u"),
            "a stray acknowledgement changes nothing"
        );
    }

    #[test]
    fn the_bucket_is_named_after_the_prefix() {
        assert_eq!(bucket_name("site.a"), "site_a_retained");
    }
}
