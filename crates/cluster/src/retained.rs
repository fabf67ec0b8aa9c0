//! Retained messages cluster-wide (docs/cluster.md, "Retained messages"): a JetStream
//! key-value bucket holds each topic's last retained record; every node writes its local
//! retained publishes there and applies the bucket's entries, in the bucket's order, to its own
//! retained store (a cache of the bucket that serves its subscribers).
//!
//! Writing: each record is a JetStream publish to the bucket's subject, written again while
//! JetStream does not acknowledge it, until `cluster.ack_timeout_ms` after its message was
//! handed over (`acks.rs`, as the replay stream's messages; `Nats-Msg-Id` lets the bucket's
//! duplicate window drop a second copy). A retained QoS 1/2 publisher's PUBACK / PUBREC waits
//! for this acknowledgement too (`acks.rs`, `outbound.rs`).
//!
//! Converging: the watch always delivers each topic's last record (a record the bucket replaced
//! before the watch got to it is skipped, never the last one), and a node applies what it
//! delivers, so every node ends with the bucket's last record per topic. While a node's own
//! write of a topic awaits JetStream's acknowledgement, entries for that topic are held back
//! (`retained_pending.rs`): the newest is applied once the last write settled if the bucket
//! kept it after that write (a higher revision), and a write that failed has the record read
//! back.

use std::sync::Arc;
use std::time::Duration;

use crate::Inbox;
use async_nats::jetstream::{self, kv};
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt as _, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, info, warn};

use super::acks::{KeepCounters, keep};
use super::buckets::{bucket_base, kv_stream, open_kv};
use super::inbound::post_publishes;
use super::link_state::Link;
use super::retained_pending::{AfterSettling, Pending};
use super::retained_value::{RetainedRecord, key_of, topic_of};
use super::retained_write_back::write_back;
use super::retained_writer::{
    BucketWriter, MAX_WRITES_IN_FLIGHT, RetainedWrite, coalesced, unix_now,
};
use super::{ClusterCounters, ClusterPublish};
use broker_api::cluster::AcceptedRetained;

/// Entries read from the watch before they are posted to the shards.
const ENTRY_BATCH: usize = 512;
/// Wait between attempts to open the bucket (JetStream not enabled or not ready yet).
const RETRY: Duration = Duration::from_secs(2);

/// Runs the retained sync: opens (or creates) the bucket, then writes the node's retained
/// publishes from `updates` and applies the bucket's entries until the thread stops.
pub(super) async fn retained(
    link: Arc<Link>,
    mut updates: mpsc::Receiver<RetainedWrite>,
    poster: Inbox,
    (replicas, accepted): (usize, Vec<AcceptedRetained>),
) {
    let js = jetstream::new(link.client.clone());
    let store = open_bucket(&js, &bucket_name(&link.prefix), replicas).await;
    let _ = link.retained_bucket.set(());
    let mut writer = BucketWriter::new(&link, &store);
    write_back(&link, &js, &store, &mut writer, accepted).await;
    let mut sync = BucketSync::new(&link, writer);
    let mut watch = loop {
        match store.watch_with_history(">").await {
            Ok(watch) => break watch,
            Err(e) => {
                warn!(error = %e, "cluster: retained bucket watch failed; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    };
    let mut acks = FuturesUnordered::new();
    loop {
        tokio::select! {
            Some(first) = updates.recv(), if acks.len() < MAX_WRITES_IN_FLIGHT => {
                let room = MAX_WRITES_IN_FLIGHT - acks.len();
                for write in coalesced(first, &mut updates, room) {
                    acks.push(sync.write(&link, &js, write).await);
                }
            }
            Some((topic, revision, kept)) = acks.next(), if !acks.is_empty() => {
                for waiting in kept {
                    let _ = waiting.send(revision.is_some());
                }
                let current = sync.settled(&store, &topic, revision).await;
                post_publishes(&link.counters, &poster, current.into_iter().collect());
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

/// The node's side of the bucket: its writer, and its writes not yet settled.
struct BucketSync {
    writer: BucketWriter,
    counters: Arc<ClusterCounters>,
    pending: Pending,
}

/// A write's topic, the bucket revision it was kept under (`None`: not kept), and who waits
/// for whether it was.
type Settled = (String, Option<u64>, Vec<oneshot::Sender<bool>>);

impl BucketSync {
    fn new(link: &Link, writer: BucketWriter) -> Self {
        Self {
            writer,
            counters: Arc::clone(&link.counters),
            pending: Pending::default(),
        }
    }

    /// Sends a local retained publish to the bucket; the future of its settling: kept once
    /// JetStream acknowledged it, written again while it does not (`acks.rs`, as the replay
    /// stream's messages) until its deadline.
    async fn write(
        &mut self,
        link: &Arc<Link>,
        js: &jetstream::Context,
        write: RetainedWrite,
    ) -> impl Future<Output = Settled> + use<> {
        let RetainedWrite {
            message,
            deadline,
            kept,
        } = write;
        let topic = message.publish.topic().as_str().to_owned();
        let record = self.writer.record(&message);
        let attempt = self
            .writer
            .first_attempt(js, &topic, &record, deadline)
            .await;
        self.pending.sent(&topic);
        let (link, js) = (Arc::clone(link), js.clone());
        async move {
            let counted = KeepCounters::retained(&link.counters);
            let revision = keep(&link, &js, attempt, counted).await;
            (topic, revision, kept)
        }
    }

    /// A write of `topic` was kept under `revision`, or not (counted); what this node's store
    /// takes once the topic's last write settled (`retained_pending.rs`): the newer entry held
    /// back meanwhile, or the bucket's record read back after a failure (the node's own value
    /// is then not the bucket's: without it the node would keep it, unlike every other node).
    async fn settled(
        &mut self,
        store: &kv::Store,
        topic: &str,
        revision: Option<u64>,
    ) -> Option<ClusterPublish> {
        if revision.is_none() {
            ClusterCounters::drop_one(
                &self.counters.retained_failures,
                "the retained bucket did not keep a write within cluster.ack_timeout_ms",
            );
        }
        match self.pending.settle(topic, revision) {
            AfterSettling::Nothing => None,
            AfterSettling::Apply(publish) => {
                ClusterCounters::add(&self.counters.retained_in, 1);
                Some(publish)
            }
            AfterSettling::ReadBack => self.read_back(store, topic).await,
        }
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
        let record = record.unwrap_or_else(|| cleared(&self.writer.origin));
        let key = topic.as_str().to_owned();
        let publish = record.into_publish(topic, unix_now());
        let applied = self.pending.hold_back(&key, entry.revision, publish)?;
        ClusterCounters::add(&self.counters.retained_in, 1);
        Some(applied)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_is_named_after_the_prefix() {
        assert_eq!(bucket_name("site.a"), "site_a_retained");
    }
}
