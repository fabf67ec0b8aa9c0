//! After a restart with its store (docs/cluster.md, "Retained messages"): the retained
//! messages this node accepted from clients that the bucket lacks, or holds only an older
//! record of, are written back, so that what was acknowledged while NATS was down (or whose
//! bucket write was lost with the node) reaches the other nodes.
//!
//! Older means the bucket stored its record before this node accepted its message: the
//! record's bucket timestamp (`created`, the NATS server's clock at storage) is below the
//! message's acceptance time (this node's clock, stored with it). A record another node wrote
//! after that, a clear included, is newer and wins: the node then converges to the bucket
//! through the watch as any node does. Equal records are not written again. Runs once the
//! bucket is open, before the watch starts (so the watch's first records include what was
//! written back); the reads and the writes are pipelined and bounded.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use futures_util::stream::{self, FuturesUnordered};
use tracing::{debug, info, warn};

use super::ClusterCounters;
use super::acks::{KeepCounters, keep};
use super::link_state::Link;
use super::retained_value::{RetainedRecord, key_of};
use super::retained_writer::{BucketWriter, MAX_WRITES_IN_FLIGHT};
use broker_api::cluster::AcceptedRetained;

/// Bucket records read at once to compare them with the node's own.
const READS_IN_FLIGHT: usize = 64;

/// Writes back the records of `accepted` that the bucket lacks or holds older; counted in
/// `ringmq_cluster_retained_written_back_total` (failures in `..._retained_failures_total`).
pub(super) async fn write_back(
    link: &Arc<Link>,
    js: &jetstream::Context,
    store: &kv::Store,
    writer: &mut BucketWriter,
    accepted: Vec<AcceptedRetained>,
) {
    if accepted.is_empty() {
        return;
    }
    let checked = accepted.len();
    let mut reads = stream::iter(accepted)
        .map(|candidate| async move {
            let topic = candidate.message.publish.topic().as_str();
            let bucket = store.entry(key_of(topic)).await;
            (candidate, bucket)
        })
        .buffer_unordered(READS_IN_FLIGHT);
    let (mut newer, mut unread) = (Vec::new(), 0usize);
    while let Some((candidate, bucket)) = reads.next().await {
        match bucket {
            Ok(bucket) if newer_than_bucket(&candidate, bucket.as_ref()) => newer.push(candidate),
            Ok(_) => {}
            Err(e) => {
                unread += 1;
                debug!(error = %e, "cluster: a retained record not read: not written back");
            }
        }
    }
    if unread > 0 {
        warn!(
            unread,
            "cluster: bucket records not read after a restart: this node's retained messages of those topics are not written back"
        );
    }
    let to_write = newer.len();
    let written = write_all(link, js, writer, newer).await;
    info!(
        checked,
        to_write,
        written,
        "cluster: retained messages of this node's store written back to the bucket"
    );
}

/// Writes each message's record, at most [`MAX_WRITES_IN_FLIGHT`] awaited at once, each
/// written again until `cluster.ack_timeout_ms` (`acks.rs`); how many the bucket kept.
async fn write_all(
    link: &Arc<Link>,
    js: &jetstream::Context,
    writer: &mut BucketWriter,
    newer: Vec<AcceptedRetained>,
) -> usize {
    let counted = KeepCounters {
        stored: &link.counters.retained_written_back,
        retries: &link.counters.retained_retries,
    };
    let mut writes = FuturesUnordered::new();
    let mut kept = 0;
    let mut settle = |stored: Option<u64>| match stored {
        Some(_) => kept += 1,
        None => ClusterCounters::drop_one(
            &link.counters.retained_failures,
            "a retained record of this node's store was not written back within cluster.ack_timeout_ms",
        ),
    };
    for candidate in newer {
        if writes.len() >= MAX_WRITES_IN_FLIGHT
            && let Some(stored) = writes.next().await
        {
            settle(stored);
        }
        let topic = candidate.message.publish.topic().as_str();
        let record = writer.record(&candidate.message);
        let deadline = Instant::now() + link.ack_timeout;
        let attempt = writer.first_attempt(js, topic, &record, deadline).await;
        writes.push(keep(link, js, attempt, counted));
    }
    while let Some(stored) = writes.next().await {
        settle(stored);
    }
    kept
}

/// Whether this node's message is newer than the bucket's record of its topic: none, or one
/// stored before the node accepted the message, and not the same record.
fn newer_than_bucket(candidate: &AcceptedRetained, bucket: Option<&kv::Entry>) -> bool {
    let Some(entry) = bucket else {
        return true;
    };
    let stored_at = SystemTime::from(entry.created);
    stored_at < candidate.accepted_at && !same_message(candidate, entry)
}

/// Whether the bucket's entry records the same retained message (payload, QoS, properties).
fn same_message(candidate: &AcceptedRetained, entry: &kv::Entry) -> bool {
    if entry.operation != kv::Operation::Put {
        return false;
    }
    let Ok(record) = RetainedRecord::decode(entry.value.clone()) else {
        return false;
    };
    let message = &candidate.message;
    record.payload == *message.publish.payload()
        && record.qos == message.qos
        && record.properties == *message.publish.shared_properties()
}
