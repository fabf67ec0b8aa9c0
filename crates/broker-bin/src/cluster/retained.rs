//! Retained messages cluster-wide (docs/cluster.md, "Retained messages"): a JetStream
//! key-value bucket holds each topic's last retained record; every node writes its local
//! retained publishes there and applies the bucket's entries, in the bucket's order, to its own
//! retained store (a cache of the bucket that serves its subscribers).
//!
//! Converging: every node applies the same sequence of entries, so all end with the bucket's
//! last record per topic. A node's own write that has not come back through the watch yet is
//! newer than anything the watch delivers before it, so while a topic has such writes pending,
//! entries of other nodes for it are skipped (each would be overwritten by the pending write);
//! the node's own entry is applied when it is the last one pending (it restores the bucket's
//! order if another node's entry was applied in the moment between the local publish and its
//! write being counted).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, context::PublishAckFuture, kv};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt as _, StreamExt};
use ring_runtime::Poster;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::inbound::post_publishes;
use super::link::Link;
use super::retained_value::{RetainedRecord, key_of, topic_of};
use super::{ClusterCounters, ClusterPublish};
use crate::message::{Expiry, Message, ShardMsg};

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
    poster: Poster<ShardMsg>,
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
                if let Some(ack) = sync.write(&js, &message).await {
                    acks.push(ack);
                }
            }
            Some((topic, acked)) = acks.next(), if !acks.is_empty() => {
                if acked.is_err() {
                    sync.write_failed(&topic);
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

/// The bucket of the cluster with subject prefix `prefix`: `<prefix>_retained`, characters
/// other than letters, digits, `-` and `_` written as `_`.
pub(super) fn bucket_name(prefix: &str) -> String {
    let clean: String = prefix
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '_',
            },
        )
        .collect();
    format!("{clean}_retained")
}

/// The bucket, created if missing (one record per topic, file storage, `replicas` copies);
/// retried until JetStream answers.
async fn open_bucket(js: &jetstream::Context, bucket: &str, replicas: usize) -> kv::Store {
    let mut warned = false;
    loop {
        let opened = match js.get_key_value(bucket).await {
            Ok(store) => Ok(store),
            Err(_) => create_bucket(js, bucket, replicas).await,
        };
        match opened {
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

/// Creates the bucket's stream as NATS's key-value layout defines it (`KV_<bucket>` on
/// `$KV.<bucket>.>`), then opens it. Not `create_key_value`: that first reads the account's
/// JetStream info in a form NATS 2.9 servers (Debian's) do not send. Creating an existing
/// bucket with the same settings (another node did it first) succeeds.
async fn create_bucket(
    js: &jetstream::Context,
    bucket: &str,
    replicas: usize,
) -> Result<kv::Store, async_nats::Error> {
    js.get_or_create_stream(bucket_stream(bucket, replicas))
        .await?;
    Ok(js.get_key_value(bucket).await?)
}

fn bucket_stream(bucket: &str, replicas: usize) -> jetstream::stream::Config {
    jetstream::stream::Config {
        name: format!("KV_{bucket}"),
        description: Some("RingMQ retained messages, one record per topic".into()),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        storage: jetstream::stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        num_replicas: replicas,
        discard: jetstream::stream::DiscardPolicy::New,
        ..jetstream::stream::Config::default()
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
    ) -> Option<impl Future<Output = Acked> + use<>> {
        let topic = message.publish.topic().as_str().to_owned();
        let record = self.record(message);
        let subject = format!("{}{}", self.subject_prefix, key_of(&topic));
        match js.publish(subject, record.encode()).await {
            Ok(ack) => {
                self.pending.sent(&topic);
                ClusterCounters::add(&self.counters.retained_out, 1);
                Some(acknowledged(topic, ack))
            }
            Err(e) => {
                debug!(error = %e, "cluster: retained write not sent");
                ClusterCounters::drop_one(
                    &self.counters.retained_failures,
                    "a retained message could not be written to the bucket",
                );
                None
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

    /// A write the bucket refused: no longer pending (counted).
    fn write_failed(&mut self, topic: &str) {
        self.pending.settle(topic);
        ClusterCounters::drop_one(
            &self.counters.retained_failures,
            "the retained bucket refused a write",
        );
    }

    /// Applies one bucket entry: pushes what this node's retained store should take.
    fn apply(&mut self, entry: Result<kv::Entry, kv::WatcherError>, out: &mut Vec<ClusterPublish>) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                debug!(error = %e, "cluster: retained watch error");
                return;
            }
        };
        // `$SYS` is each node's own: never taken from the bucket (no node writes it there).
        let topic = match topic_of(&entry.key) {
            Ok(topic) if !topic.as_str().starts_with("$SYS") => topic,
            _ => {
                let why = "a retained key is not a topic a node writes";
                ClusterCounters::drop_one(&self.counters.dropped_inbound, why);
                return;
            }
        };
        let record = match entry.operation {
            kv::Operation::Put => match RetainedRecord::decode(entry.value) {
                Ok(record) => Some(record),
                Err(_) => {
                    let why = "a retained record is malformed";
                    ClusterCounters::drop_one(&self.counters.dropped_inbound, why);
                    return;
                }
            },
            // Removed with other tools (`nats kv del`): a clear from nobody in particular.
            kv::Operation::Delete | kv::Operation::Purge => None,
        };
        let ours = record.as_ref().is_some_and(|r| r.origin == self.origin);
        if !self.pending.takes(topic.as_str(), ours) {
            return;
        }
        let record = record.unwrap_or_else(|| cleared(&self.origin));
        ClusterCounters::add(&self.counters.retained_in, 1);
        out.push(record.into_publish(topic, unix_now()));
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

/// Per topic, this node's writes sent to the bucket but not yet delivered back by the watch
/// (bounded by the writes in flight and the update queue).
#[derive(Debug, Default)]
struct Pending {
    writes: HashMap<String, u32>,
}

impl Pending {
    /// One more write of `topic` sent.
    fn sent(&mut self, topic: &str) {
        *self.writes.entry(topic.to_owned()).or_insert(0) += 1;
    }

    /// One write of `topic` came back or failed; whether none is pending any more.
    fn settle(&mut self, topic: &str) -> bool {
        let Some(count) = self.writes.get_mut(topic) else {
            return true;
        };
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.writes.remove(topic);
            return true;
        }
        false
    }

    /// Whether an entry for `topic` (`ours`: written by this node in this run) is applied:
    /// another node's only while none of ours is pending (ours come later in the bucket and
    /// overwrite it); ours when it is the last pending.
    fn takes(&mut self, topic: &str, ours: bool) -> bool {
        match ours {
            true => self.settle(topic),
            false => !self.writes.contains_key(topic),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_others_wait_for_our_pending_writes() {
        let mut pending = Pending::default();
        assert!(
            pending.takes("t", false),
            "nothing pending: another node's entry applies"
        );
        pending.sent("t");
        pending.sent("t");
        assert!(
            !pending.takes("t", false),
            "our later write will overwrite it"
        );
        assert!(
            !pending.takes("t", true),
            "our first write: the second is still pending"
        );
        assert!(pending.takes("t", true), "our last write applies");
        assert!(
            pending.takes("t", false),
            "after it, another node's entry applies"
        );
        pending.sent("u");
        assert!(pending.settle("u"), "a failed write is no longer pending");
        assert!(pending.takes("u", false));
        assert!(
            pending.takes("v", true),
            "an own entry from before a restart applies"
        );
    }

    #[test]
    fn bucket_names_are_valid_and_follow_the_prefix() {
        assert_eq!(bucket_name("ringmq"), "ringmq_retained");
        assert_eq!(bucket_name("site.a"), "site_a_retained");
    }
}
