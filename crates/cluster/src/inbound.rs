//! The inbound half of the cluster thread: NATS messages to the shards, duplicates dropped,
//! batches posted with the runtime's `ClusterInbox`, one per shard.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use codec::MqttStr;
use ring_runtime::ShardId;

use crate::Inbox;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::headers::{self, Origin};
use super::link_state::Link;
use super::read_back::{ReadBackPair, read_back_pair};
use super::subject::subject_to_topic;
use super::{ClusterCounters, ClusterPublish, Scope};
use broker_api::ClusterInbound;

/// Most messages posted to the shards in one round.
const INBOUND_BATCH: usize = 512;

/// Hands NATS messages to the shards: duplicates (one message matching several of this
/// node's plain subscriptions) dropped, the rest posted in batches, one per shard.
pub(super) async fn inbound(
    link: Arc<Link>,
    mut messages: mpsc::Receiver<(Scope, async_nats::Message)>,
    poster: Inbox,
) {
    let mut seen = Seen::default();
    let shards = poster.shard_count().max(1);
    let mut batches: Vec<Vec<ClusterInbound>> = (0..shards).map(|_| Vec::new()).collect();
    while let Some(first) = messages.recv().await {
        let mut next = Some(first);
        let mut taken = 0;
        while let Some((scope, message)) = next.take() {
            taken += 1;
            if let Some(publish) = accept(&link, &mut seen, scope, message) {
                let shard = shard_of(publish.topic.as_str(), shards);
                batches[shard].push(ClusterInbound::Publish(Box::new(publish)));
            }
            if taken < INBOUND_BATCH {
                next = messages.try_recv().ok();
            }
        }
        let live = &link.replays.live_keys;
        let keys: Option<Vec<Vec<u64>>> = live
            .noting()
            .then(|| batches.iter().map(|batch| keys_of(batch)).collect());
        let posted = post_batches(&link.counters, &poster, &mut batches);
        if let Some(keys) = keys {
            live.note(
                posted
                    .into_iter()
                    .flat_map(|shard| keys[shard].iter().copied()),
            );
        }
    }
}

/// The keys of the messages in `batch` for plain subscriptions (`live_keys.rs`: the catch-up
/// reads for plain subscriptions only; a message that came for a shared subscription alone
/// reached no plain one).
fn keys_of(batch: &[ClusterInbound]) -> Vec<u64> {
    let key = |inbound: &ClusterInbound| match inbound {
        ClusterInbound::Publish(publish) => match publish.scope {
            Scope::Plain | Scope::PlainExcept(_) => Some(publish.key),
            _ => None,
        },
        _ => None,
    };
    batch.iter().filter_map(key).collect()
}

/// The message a NATS message carries, unless it is a duplicate or malformed (counted).
fn accept(
    link: &Link,
    seen: &mut Seen,
    scope: Scope,
    message: async_nats::Message,
) -> Option<ClusterPublish> {
    let decoded = decode(link, scope, message, seen);
    match decoded {
        Ok(Some(publish)) => Some(except_read_back(link, publish)),
        Ok(None) => None,
        Err(e) => {
            debug!(error = %e, "cluster: malformed message");
            ClusterCounters::drop_one(
                &link.counters.dropped_inbound,
                "malformed message from NATS",
            );
            None
        }
    }
}

/// `publish`, for its plain subscriptions, skips the sessions that had it read back for them
/// alone (`read_back.rs`: a QoS 2 message coming again, as in a node replay), besides those
/// its scope skips already (a replayed message: `arrivals.rs`).
fn except_read_back(link: &Link, mut publish: ClusterPublish) -> ClusterPublish {
    let plain = matches!(publish.scope, Scope::Plain | Scope::PlainExcept(_));
    if plain && publish.qos == codec::QoS::ExactlyOnce {
        let had = link.replays.read_back.sessions_that_had(publish.key);
        if !had.is_empty() {
            publish.scope = match std::mem::replace(&mut publish.scope, Scope::Plain) {
                Scope::PlainExcept(mut skipped) => {
                    skipped.extend(had);
                    Scope::PlainExcept(skipped)
                }
                _ => Scope::PlainExcept(had),
            };
        }
    }
    publish
}

/// Why a NATS message was not taken.
#[derive(Debug, thiserror::Error)]
enum InboundError {
    #[error(transparent)]
    Subject(#[from] super::subject::SubjectError),
    #[error(transparent)]
    Header(#[from] headers::HeaderError),
    #[error("no headers")]
    NoHeaders,
    #[error("topic is not an MQTT string")]
    Topic,
}

fn decode(
    link: &Link,
    scope: Scope,
    message: async_nats::Message,
    seen: &mut Seen,
) -> Result<Option<ClusterPublish>, InboundError> {
    let headers = message.headers.as_ref().ok_or(InboundError::NoHeaders)?;
    let plain = matches!(scope, Scope::Plain | Scope::PlainExcept(_));
    if plain && !seen.first(headers::origin(headers)?) {
        return Ok(None);
    }
    // Its node served this share itself while NATS was down.
    if matches!(scope, Scope::Group(_)) && headers::shares_served(headers) {
        return Ok(None);
    }
    let topic = subject_to_topic(&link.prefix, message.subject.as_str())?;
    let topic = MqttStr::try_from(topic).map_err(|_| InboundError::Topic)?;
    Ok(Some(headers::decode(
        topic,
        message.payload,
        headers,
        scope,
    )?))
}

/// The message numbers recently seen from each node run, for plain subscriptions: a message
/// that matches several of this node's plain subscriptions (`a/#` and `a/+`) comes once per
/// subscription, and only its first copy is routed. Each reader task forwards its
/// subscription's copies in order but the readers interleave freely, so the check is by
/// number, not by order. The last [`SEEN_WINDOW`] numbers per run are kept.
#[derive(Debug, Default)]
struct Seen {
    runs: HashMap<String, Recent>,
}

/// The most message numbers remembered per node run.
const SEEN_WINDOW: usize = 65_536;

/// One node run's recent message numbers.
#[derive(Debug, Default)]
struct Recent {
    numbers: std::collections::HashSet<u64>,
    order: std::collections::VecDeque<u64>,
}

impl Seen {
    /// Whether `origin`'s message is seen for the first time (and remembers it).
    fn first(&mut self, origin: Origin) -> bool {
        let recent = self.runs.entry(origin.node).or_default();
        if !recent.numbers.insert(origin.seq) {
            return false;
        }
        recent.order.push_back(origin.seq);
        if recent.order.len() > SEEN_WINDOW
            && let Some(oldest) = recent.order.pop_front()
        {
            recent.numbers.remove(&oldest);
        }
        true
    }
}

/// The shard that routes messages on `topic` (one topic, one shard: its order is kept).
fn shard_of(topic: &str, shards: usize) -> usize {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    topic.hash(&mut hasher);
    (hasher.finish() % shards as u64) as usize
}

/// Posts `publishes` to the shards that route their topics, one batch per shard.
pub(super) fn post_publishes(
    counters: &ClusterCounters,
    poster: &Inbox,
    publishes: Vec<ClusterPublish>,
) {
    let shards = poster.shard_count().max(1);
    let mut batches: Vec<Vec<ClusterInbound>> = (0..shards).map(|_| Vec::new()).collect();
    for publish in publishes {
        let shard = shard_of(publish.topic.as_str(), shards);
        batches[shard].push(ClusterInbound::Publish(Box::new(publish)));
    }
    post_batches(counters, poster, &mut batches);
}

/// Posts `publishes`, read back from the replay stream for one session alone each
/// (`Scope::Session`), noting the QoS 2 ones first (`read_back.rs`), so that the same message
/// coming again for the node's plain subscriptions skips their sessions; a batch not posted
/// is forgotten again.
pub(super) fn post_read_back(link: &Link, poster: &Inbox, publishes: Vec<ClusterPublish>) {
    let shards = poster.shard_count().max(1);
    let mut batches: Vec<Vec<ClusterInbound>> = (0..shards).map(|_| Vec::new()).collect();
    let mut pairs: Vec<Vec<ReadBackPair>> = (0..shards).map(|_| Vec::new()).collect();
    for publish in publishes {
        let shard = shard_of(publish.topic.as_str(), shards);
        pairs[shard].extend(read_back_pair(&publish));
        batches[shard].push(ClusterInbound::Publish(Box::new(publish)));
    }
    let read_back = &link.replays.read_back;
    pairs
        .iter()
        .for_each(|shard_pairs| read_back.note(shard_pairs));
    let posted = post_batches(&link.counters, poster, &mut batches);
    for (shard, shard_pairs) in pairs.iter().enumerate() {
        if !posted.contains(&shard) {
            read_back.forget(shard_pairs);
        }
    }
}

/// Posts each shard's batch; a full mailbox drops its batch, counted. The shards whose batch
/// was posted.
fn post_batches(
    counters: &ClusterCounters,
    poster: &Inbox,
    batches: &mut [Vec<ClusterInbound>],
) -> Vec<usize> {
    let mut posted = Vec::new();
    for (index, batch) in batches.iter_mut().enumerate() {
        if batch.is_empty() {
            continue;
        }
        let messages = std::mem::take(batch);
        let count = messages.len() as u64;
        match poster.post(ShardId::new(index as u16), messages) {
            Ok(()) => {
                ClusterCounters::add(&counters.messages_in, count);
                posted.push(index);
            }
            Err(_) => {
                warn!(
                    shard = index,
                    count, "cluster: shard mailbox full, messages from the cluster dropped"
                );
                ClusterCounters::add(&counters.dropped_inbound, count);
            }
        }
    }
    posted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_copies_of_a_message_are_duplicates() {
        let mut seen = Seen::default();
        let origin = |node: &str, seq| Origin {
            node: node.into(),
            seq,
        };
        assert!(seen.first(origin("n1/1", 1)));
        assert!(!seen.first(origin("n1/1", 1)));
        assert!(seen.first(origin("n1/1", 3)));
        assert!(
            seen.first(origin("n1/1", 2)),
            "another subscription's reader lagged"
        );
        assert!(!seen.first(origin("n1/1", 2)));
        assert!(seen.first(origin("n2/1", 2)));
        assert!(seen.first(origin("n1/2", 1)), "a new run starts over");
    }

    #[test]
    fn only_plain_messages_count_as_delivered_live() {
        let publish = |scope, key| {
            ClusterInbound::Publish(Box::new(ClusterPublish {
                topic: MqttStr::try_from("t").unwrap(),
                payload: bytes::Bytes::new(),
                properties: bytes::Bytes::new(),
                qos: codec::QoS::ExactlyOnce,
                retain: false,
                expiry: None,
                scope,
                key,
            }))
        };
        let batch = [
            publish(Scope::Plain, 1),
            publish(Scope::Group("$share/g/t".into()), 2),
            publish(Scope::Session(MqttStr::try_from("c").unwrap()), 3),
            publish(Scope::Plain, 4),
        ];
        assert_eq!(keys_of(&batch), [1, 4]);
    }

    #[test]
    fn one_topic_always_goes_to_one_shard() {
        assert_eq!(shard_of("a/b", 4), shard_of("a/b", 4));
        assert!(shard_of("a/b", 4) < 4);
    }
}
