//! Writes the shards' QoS 2 delivery steps to the journal stream (`journal.rs`; docs/cluster.md,
//! "Exactly once across a node's death"): the stream `<base>_journal` on `<prefix>.journal.>`,
//! kept as long as the replay stream keeps messages (`cluster.replay_window_ms`), one subject
//! per node run. The turns waiting when a write begins go in one JetStream publish; once
//! JetStream keeps it, their numbers settle and the shards let the held packets go. A write
//! is tried until JetStream keeps it (a QoS 2 message delivered unjournaled reaches its client
//! twice if the node dies before its next steps are kept: the 300-fault run of seed 5050 on
//! 40c9782 had 365 + 635 so at 1,369-1,372 s, written off 1 s before the node was killed),
//! unless `cluster.qos2_journal_wait_ms` is set: then a write not kept within it is given up,
//! its numbers settle all the same, counted and logged. While writes wait, the turns handed
//! over queue behind them up to `cluster.max_outbound_messages`; beyond it a shard's turn is
//! not journaled at all (counted: `handle.rs`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use broker_api::cluster::JournalEntry;
use ring_runtime::ShardId;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::buckets::bucket_base;
use super::link_state::Link;
use super::replays::Window;
use super::retained_value::key_of;
use super::{ClusterCounters, Settled};

/// At most this many shard turns go in one write.
const TURNS_PER_WRITE: usize = 256;
/// The most bytes of records in one JetStream publish (a write of more is several, in order;
/// NATS servers refuse payloads over their `max_payload`, 1 MiB by default).
const MAX_PUBLISH_BYTES: usize = 256 << 10;
/// Between attempts of a write JetStream did not keep.
const RETRY: Duration = Duration::from_millis(100);
/// Failed attempts of one write before the wait is logged.
const WARN_AFTER_FAILURES: u32 = 20;
/// Between attempts to open the stream.
const OPEN_RETRY: Duration = Duration::from_secs(2);

/// One shard turn's steps.
#[derive(Debug)]
pub(crate) struct JournalTurn {
    pub(crate) shard: ShardId,
    pub(crate) number: u64,
    pub(crate) entries: Vec<JournalEntry>,
    /// Given up at this moment (`cluster.qos2_journal_wait_ms` after it was handed over;
    /// `None`: never).
    pub(crate) deadline: Option<Instant>,
}

/// The subject of node run `run`'s journal.
pub(super) fn journal_subject(prefix: &str, run: &str) -> String {
    format!("{prefix}.journal.{}", key_of(run))
}

/// The subjects of every node run's journal.
pub(super) fn every_journal_subject(prefix: &str) -> String {
    format!("{prefix}.journal.*")
}

/// Opens the stream (retrying until JetStream answers; turns handed over meanwhile wait, and
/// those past their deadline are given up), then writes every turn handed over. With
/// `cluster.qos2_journal = false` (`journaled`) the stream is still opened, for the journals
/// other nodes wrote, but this node writes none (the shards hand nothing over).
pub(super) async fn write_journal(
    link: Arc<Link>,
    (window, journaled): (Window, bool),
    (mut turns, settled): (mpsc::Receiver<JournalTurn>, Arc<Settled>),
) {
    let js = jetstream::new(link.client.clone());
    let mut waiting = VecDeque::new();
    let opening = open(&js, &link.prefix, &window);
    tokio::pin!(opening);
    let stream = loop {
        tokio::select! {
            stream = &mut opening => break stream,
            turn = turns.recv() => match turn {
                Some(turn) => waiting.push_back(turn),
                None => return,
            },
            () = tokio::time::sleep(OPEN_RETRY) => {}
        }
        let now = Instant::now();
        let expired = (waiting.iter())
            .take_while(|t| t.deadline.is_some_and(|deadline| deadline <= now))
            .count();
        if expired > 0 {
            settle(&link, &settled, waiting.drain(..expired).collect(), false);
        }
    };
    let _ = link.replays.journal.set(stream);
    if !journaled {
        return info!("cluster: QoS 2 deliveries not journaled (cluster.qos2_journal = false)");
    }
    info!("cluster: QoS 2 deliveries journaled");
    let subject = async_nats::Subject::from(journal_subject(&link.prefix, &link.origin));
    loop {
        if waiting.is_empty() {
            match turns.recv().await {
                Some(first) => waiting.push_back(first),
                None => return,
            }
        }
        while waiting.len() < TURNS_PER_WRITE {
            match turns.try_recv() {
                Ok(turn) => waiting.push_back(turn),
                Err(_) => break,
            }
        }
        let group: Vec<JournalTurn> = waiting
            .drain(..waiting.len().min(TURNS_PER_WRITE))
            .collect();
        let entries = group.iter().flat_map(|turn| &turn.entries);
        let deadline = group.iter().filter_map(|turn| turn.deadline).min();
        let mut kept = true;
        for payload in super::journal::encode(entries, MAX_PUBLISH_BYTES) {
            kept = kept && write(&link, &js, &subject, payload, deadline).await;
        }
        settle(&link, &settled, group, kept);
    }
}

/// Settles `turns` (their packets may leave), counting their steps as written (`kept`) or
/// given up.
fn settle(link: &Link, settled: &Settled, turns: Vec<JournalTurn>, kept: bool) {
    let steps: usize = turns.iter().map(|turn| turn.entries.len()).sum();
    if kept {
        ClusterCounters::add(&link.counters.journal_writes, steps as u64);
    } else if steps > 0 {
        ClusterCounters::add(&link.counters.journal_failures, steps as u64);
        warn!(
            steps,
            "cluster: JetStream did not keep QoS 2 delivery steps within cluster.ack_timeout_ms; their packets leave unjournaled (after this node's death those messages may reach their clients twice)"
        );
    }
    for turn in turns {
        settled.settle(turn.shard, turn.number);
    }
}

/// Publishes `payload` until JetStream keeps it (`true`) or `deadline` passes (`None`: tried
/// until kept, each attempt within `cluster.ack_timeout_ms`).
async fn write(
    link: &Link,
    js: &jetstream::Context,
    subject: &async_nats::Subject,
    payload: bytes::Bytes,
    deadline: Option<Instant>,
) -> bool {
    let mut failures = 0u32;
    loop {
        let attempt_until = deadline.unwrap_or_else(|| Instant::now() + link.ack_timeout);
        let left = attempt_until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        if link.wait_connected_until(attempt_until).await {
            let attempt = async {
                let ack = js.publish(subject.clone(), payload.clone()).await?;
                ack.await.map_err(async_nats::Error::from)
            };
            match tokio::time::timeout(left, attempt).await {
                Ok(Ok(_)) => return true,
                Ok(Err(e)) => debug!(error = %e, "cluster: a journal write failed; trying again"),
                Err(_) => debug!("cluster: a journal write was not kept in time; trying again"),
            }
        }
        if deadline.is_some_and(|deadline| deadline <= Instant::now()) {
            return false;
        }
        failures += 1;
        if failures == WARN_AFTER_FAILURES {
            warn!(
                "cluster: JetStream does not keep the delivery journal's writes; journaled QoS 2 deliveries wait until it does"
            );
        }
        let pause = deadline.map_or(RETRY, |d| {
            RETRY.min(d.saturating_duration_since(Instant::now()))
        });
        tokio::time::sleep(pause).await;
    }
}

/// The stream `<base>_journal` on `<prefix>.journal.>`, created if missing.
async fn open(js: &jetstream::Context, prefix: &str, window: &Window) -> stream::Stream {
    let config = stream::Config {
        name: format!("{}_journal", bucket_base(prefix)),
        description: Some("RingMQ: QoS 2 deliveries to mirrored sessions".into()),
        subjects: vec![format!("{prefix}.journal.>")],
        max_age: window.max_age,
        storage: stream::StorageType::File,
        num_replicas: window.replicas,
        discard: stream::DiscardPolicy::Old,
        ..stream::Config::default()
    };
    let unavailable =
        "the delivery journal is not available; QoS 2 deliveries are not journaled until it is";
    super::buckets::open_stream_retrying(js, config, (unavailable, OPEN_RETRY)).await
}
