//! JetStream's acknowledgements of QoS 1/2 publishes (docs/cluster.md, "Guarantees"): each is
//! awaited, and a publish JetStream does not acknowledge (no answer in time, an error, or the
//! NATS connection lost meanwhile) is made again, with the same `Nats-Msg-Id`, until JetStream
//! acknowledges it or `cluster.ack_timeout_ms` has passed since the shard handed it over. A
//! second copy that reaches the stream is dropped by its duplicate window, one that reaches a
//! node through NATS core by the node's duplicate check (`inbound.rs`). The messages settle in
//! the order they were published, those given up marked failed (`settled.rs`): their
//! publishers are refused.

use std::collections::HashMap;
use std::future::IntoFuture;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::sync::atomic::AtomicU64;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, context::PublishAckFuture};
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use ring_runtime::ShardId;
use tokio::sync::{mpsc, oneshot};
use tracing::warn;

use super::link_state::Link;
use super::{ClusterCounters, Settled};

/// JetStream acknowledgements awaited at once (the outbound path waits beyond): the messages
/// published again come from these, so the retries are bounded by it too.
pub(super) const ACKS_IN_FLIGHT: usize = 1024;
/// The longest one JetStream publish waits for its acknowledgement before it is made again.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// The first pause before a publish JetStream refused at once is made again (doubling up to
/// [`MAX_PAUSE`]): while a stream has no leader, JetStream answers at once.
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);
/// How often the shards waiting for a message not settled yet are woken (they refuse what
/// waited past `cluster.ack_timeout_ms`, also while the message still waits to be sent).
const WAKE_EVERY: Duration = Duration::from_millis(100);

/// A JetStream publish made, and what it takes to make it again.
pub(super) struct Attempt {
    pub(super) subject: async_nats::Subject,
    /// With `Nats-Msg-Id`: this node run and the message's number.
    pub(super) headers: HeaderMap,
    pub(super) payload: Bytes,
    /// `None`: the publish itself failed.
    pub(super) ack: Option<PublishAckFuture>,
    /// Published again until then.
    pub(super) deadline: Instant,
}

/// A message handed to NATS whose JetStream acknowledgement is awaited (`attempt`) or whose
/// shard waits for it to settle (`settle`: its shard and number there), or both.
pub(super) struct Pending {
    pub(super) settle: Option<(ShardId, u64)>,
    pub(super) attempt: Option<Attempt>,
    /// A retained message's record in the retained bucket: whether the bucket kept it
    /// (`retained.rs`, made again like `attempt`). Its publisher is acknowledged only when
    /// both are kept.
    pub(super) retained: Option<oneshot::Receiver<bool>>,
}

/// What became of a [`Pending`] message: whether JetStream kept it (`None`: nothing was
/// awaited) and whether the retained bucket kept its record (`true` when none was written).
struct Outcome {
    settle: Option<(ShardId, u64)>,
    kept: Option<bool>,
    retained_kept: bool,
}

/// Which counters a kept publish and a publish made again count in.
#[derive(Clone, Copy)]
pub(super) struct KeepCounters<'a> {
    pub(super) stored: &'a AtomicU64,
    pub(super) retries: &'a AtomicU64,
}

impl<'a> KeepCounters<'a> {
    /// The counters of QoS 1/2 messages in the replay stream.
    pub(super) fn messages(counters: &'a ClusterCounters) -> Self {
        Self {
            stored: &counters.reliable_stored,
            retries: &counters.reliable_retries,
        }
    }

    /// The counters of the retained bucket's records.
    pub(super) fn retained(counters: &'a ClusterCounters) -> Self {
        Self {
            stored: &counters.retained_out,
            retries: &counters.retained_retries,
        }
    }
}

/// Awaits the JetStream acknowledgements (up to [`ACKS_IN_FLIGHT`] messages at once, each
/// published again as it needs), counts them, and settles the messages in the order they
/// were published: a shard's acknowledgements then leave in its publishers' order.
pub(super) async fn await_acks(
    link: Arc<Link>,
    settled: Arc<Settled>,
    mut pending: mpsc::Receiver<Pending>,
) {
    let mut awaited = futures_util::stream::FuturesOrdered::new();
    let mut wake = tokio::time::interval(WAKE_EVERY);
    wake.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut open = true;
    while open || !awaited.is_empty() {
        tokio::select! {
            next = pending.recv(), if open && awaited.len() < ACKS_IN_FLIGHT => match next {
                Some(pending) => {
                    let link = Arc::clone(&link);
                    awaited.push_back(outcome(link, pending));
                }
                None => open = false,
            },
            Some(first) = awaited.next(), if !awaited.is_empty() => {
                settle_ready(&link.counters, &settled, first, &mut awaited);
            }
            _ = wake.tick() => settled.wake_waiting(),
        }
    }
}

/// Awaits what a pending message waits for: JetStream keeping it (published again as it
/// needs) and the retained bucket keeping its record (the retained writer's answer).
async fn outcome(link: Arc<Link>, pending: Pending) -> Outcome {
    let Pending {
        settle,
        attempt,
        retained,
    } = pending;
    let kept = match (attempt, link.replays.js.get()) {
        (Some(attempt), Some(js)) => {
            let counted = KeepCounters::messages(&link.counters);
            Some(keep(&link, js, attempt, counted).await.is_some())
        }
        (Some(_), None) => Some(false),
        (None, _) => None,
    };
    let retained_kept = match retained {
        // The writer dropped the answer: the record was not kept.
        Some(answer) => answer.await.unwrap_or(false),
        None => true,
    };
    Outcome {
        settle,
        kept,
        retained_kept,
    }
}

/// Settles `first` and every message ready after it, then wakes each shard once.
fn settle_ready<F>(
    counters: &ClusterCounters,
    settled: &Settled,
    first: Outcome,
    awaited: &mut futures_util::stream::FuturesOrdered<F>,
) where
    F: std::future::Future<Output = Outcome>,
{
    let mut highest: HashMap<ShardId, u64> = HashMap::new();
    let mut next = Some(first);
    while let Some(Outcome {
        settle,
        kept,
        retained_kept,
    }) = next
    {
        if kept == Some(false) {
            count_given_up(counters);
        }
        if let Some((shard, number)) = settle {
            if kept == Some(false) || !retained_kept {
                settled.fail(shard, number);
            }
            let entry = highest.entry(shard).or_default();
            *entry = (*entry).max(number);
        }
        next = awaited.next().now_or_never().flatten();
    }
    for (shard, number) in highest {
        settled.settle(shard, number);
    }
}

/// Awaits JetStream's acknowledgement of `attempt`, publishing it again through `js` while it
/// does not come, until its deadline; the stream sequence JetStream kept it under (`None`: not
/// kept; counted in `counted`). Used for the replay stream's messages and the retained
/// bucket's records alike.
pub(super) async fn keep(
    link: &Link,
    js: &jetstream::Context,
    attempt: Attempt,
    counted: KeepCounters<'_>,
) -> Option<u64> {
    let Attempt {
        subject,
        headers,
        payload,
        mut ack,
        deadline,
    } = attempt;
    let mut pause = FIRST_PAUSE;
    loop {
        let began = Instant::now();
        let lost = link.replays.lost.notified();
        // Taken after its deadline (it waited while NATS was down): one try still.
        let wait = match deadline.saturating_duration_since(began) {
            Duration::ZERO => ATTEMPT_TIMEOUT,
            left => ATTEMPT_TIMEOUT.min(left),
        };
        let acked = match ack {
            Some(ack) => tokio::select! {
                acked = tokio::time::timeout(wait, ack.into_future()) => match acked {
                    Ok(Ok(ack)) => Some(ack.sequence),
                    _ => None,
                },
                () = lost => None,
            },
            None => None,
        };
        if acked.is_some() {
            ClusterCounters::add(counted.stored, 1);
            return acked;
        }
        // Refused at once (no stream leader yet): a pause before the next try.
        if began.elapsed() < wait {
            tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
        let again = (&subject, &headers, &payload);
        match publish_again(link, js, again, deadline, counted.retries).await {
            Some(next) => ack = Some(next),
            None => return None,
        }
    }
}

/// Publishes a message again once NATS is connected (counted in `retries`); `None` once its
/// deadline passed first.
async fn publish_again(
    link: &Link,
    js: &jetstream::Context,
    (subject, headers, payload): (&async_nats::Subject, &HeaderMap, &Bytes),
    deadline: Instant,
    retries: &AtomicU64,
) -> Option<PublishAckFuture> {
    loop {
        if !link.wait_connected_until(deadline).await {
            return None;
        }
        let published = js
            .publish_with_headers(subject.clone(), headers.clone(), payload.clone())
            .await;
        if let Ok(ack) = published {
            ClusterCounters::add(retries, 1);
            return Some(ack);
        }
        tokio::time::sleep(FIRST_PAUSE).await;
    }
}

fn count_given_up(counters: &ClusterCounters) {
    let count = counters
        .reliable_failures
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    if count.is_power_of_two() {
        warn!(
            count,
            "cluster: JetStream did not keep a QoS 1/2 message within cluster.ack_timeout_ms (its publisher, if still waiting, is refused)"
        );
    }
}
