//! The cluster thread: a NATS client on a single-threaded tokio runtime of its own.
//!
//! Three loops share the one client: outbound (the shards' queue to NATS), interest (local
//! subscriptions to NATS subscriptions, each read by a small task) and inbound (NATS
//! messages, duplicates dropped, posted to the shards in batches).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::thread::JoinHandle;

use async_nats::connection::State;
use async_nats::{Client, ConnectOptions, Event};
use codec::MqttStr;
use futures_util::StreamExt;
use ring_runtime::{Clock, Poster, ShardId};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tracing::{debug, error, info, warn};

use super::headers::{self, Origin};
use super::interest::{Action, InterestTable, NatsSubscription};
use super::subject::{subject_to_topic, topic_to_subject};
use super::{ClusterCounters, ClusterPublish, ClusterQueues, Interest, Scope};
use crate::config::ClusterSettings;
use crate::message::{Message, ShardMsg};

/// NATS messages read but not yet handed to a shard (the subscription readers wait beyond).
const INBOUND_CAPACITY: usize = 4096;
/// Most messages posted to the shards in one round.
const INBOUND_BATCH: usize = 512;

/// The running cluster thread.
#[derive(Debug)]
pub struct ClusterThread {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// What the loops share.
struct Link {
    client: Client,
    prefix: String,
    /// `<node_id>/<start nonce>`: this node in this run.
    origin: String,
    counters: Arc<ClusterCounters>,
    clock: Clock,
}

impl ClusterThread {
    /// Starts the thread; it connects (and reconnects) to NATS in the background.
    pub fn start(
        settings: ClusterSettings,
        queues: ClusterQueues,
        counters: Arc<ClusterCounters>,
        poster: Poster<ShardMsg>,
        clock: Clock,
    ) -> std::io::Result<Self> {
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("ringmq-cluster".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        error!(error = %e, "cluster: no tokio runtime");
                        return;
                    }
                };
                runtime.block_on(async move {
                    tokio::select! {
                        _ = stopped => {}
                        () = run(settings, queues, counters, poster, clock) => {}
                    }
                });
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the thread and waits for it.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ClusterThread {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Connects, then runs the three loops until the thread is stopped.
async fn run(
    settings: ClusterSettings,
    queues: ClusterQueues,
    counters: Arc<ClusterCounters>,
    poster: Poster<ShardMsg>,
    clock: Clock,
) {
    let client = match connect(&settings, Arc::clone(&counters)).await {
        Ok(client) => client,
        Err(e) => {
            error!(error = %e, "cluster: NATS client not started");
            return;
        }
    };
    let link = Arc::new(Link {
        client,
        prefix: settings.subject_prefix.clone(),
        origin: format!("{}/{:016x}", settings.node_id, start_nonce()),
        counters,
        clock,
    });
    let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_CAPACITY);
    tokio::join!(
        outbound(Arc::clone(&link), queues.outbound),
        interest(Arc::clone(&link), queues.interest, inbound_tx),
        inbound(link, inbound_rx, poster),
    );
}

/// A NATS client that never receives its own publishes and reconnects forever, logging
/// its connection state.
async fn connect(
    settings: &ClusterSettings,
    counters: Arc<ClusterCounters>,
) -> Result<Client, async_nats::ConnectError> {
    let servers: Vec<async_nats::ServerAddr> = settings
        .nats
        .iter()
        .filter_map(|url| url.parse().ok())
        .collect();
    info!(node = %settings.node_id, servers = ?settings.nats, "cluster: connecting to NATS");
    ConnectOptions::new()
        .no_echo()
        .name(format!("ringmq-{}", settings.node_id))
        .retry_on_initial_connect()
        .max_reconnects(None)
        .event_callback(move |event| {
            let counters = Arc::clone(&counters);
            async move { log_event(&counters, event) }
        })
        .connect(servers)
        .await
}

fn log_event(counters: &ClusterCounters, event: Event) {
    match event {
        Event::Connected => {
            ClusterCounters::set(&counters.connected, 1);
            info!("cluster: connected to NATS");
        }
        Event::Disconnected => {
            ClusterCounters::set(&counters.connected, 0);
            warn!(
                "cluster: disconnected from NATS (reconnecting; messages to the cluster are dropped meanwhile)"
            );
        }
        other => warn!(event = %other, "cluster: NATS event"),
    }
}

/// A number that differs between runs of a node (duplicate suppression keys on it).
fn start_nonce() -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::time::SystemTime::now().hash(&mut hasher);
    std::process::id().hash(&mut hasher);
    hasher.finish()
}

/// Publishes every message the shards hand over, in order; while NATS is down, drops them
/// (counted).
async fn outbound(link: Arc<Link>, mut queue: mpsc::Receiver<Arc<Message>>) {
    let mut seq = 0u64;
    while let Some(message) = queue.recv().await {
        if link.client.connection_state() != State::Connected {
            ClusterCounters::drop_one(&link.counters.dropped_disconnected, "NATS is not connected");
            continue;
        }
        seq += 1;
        let Ok(headers) = headers::encode(&message, &link.origin, seq, link.clock.now()) else {
            continue; // expired on the way: nobody may receive it
        };
        let subject = topic_to_subject(&link.prefix, message.publish.topic().as_str());
        let payload = message.publish.payload().clone();
        match link
            .client
            .publish_with_headers(subject, headers, payload)
            .await
        {
            Ok(()) => ClusterCounters::add(&link.counters.messages_out, 1),
            Err(e) => {
                debug!(error = %e, "cluster: publish failed");
                ClusterCounters::drop_one(
                    &link.counters.dropped_disconnected,
                    "NATS refused the publish (over its max_payload?)",
                );
            }
        }
    }
}

/// Keeps the NATS subscriptions in step with local interest.
async fn interest(
    link: Arc<Link>,
    mut changes: mpsc::UnboundedReceiver<Interest>,
    inbound: mpsc::Sender<(Scope, async_nats::Message)>,
) {
    let mut table = InterestTable::default();
    let mut readers: HashMap<String, Vec<AbortHandle>> = HashMap::new();
    while let Some(change) = changes.recv().await {
        match table.apply(&link.prefix, &change) {
            Action::Subscribe(subscriptions) => {
                let mut handles = Vec::with_capacity(subscriptions.len());
                for subscription in subscriptions {
                    if let Some(handle) = subscribe(&link, subscription, inbound.clone()).await {
                        handles.push(handle);
                    }
                }
                readers.insert(change.filter, handles);
            }
            Action::Unsubscribe => {
                for handle in readers.remove(&change.filter).into_iter().flatten() {
                    // Dropping the reader drops its subscriber, which unsubscribes.
                    handle.abort();
                }
            }
            Action::Nothing => {}
        }
        let held: usize = readers.values().map(Vec::len).sum();
        ClusterCounters::set(&link.counters.subscriptions, held as u64);
    }
}

/// Takes one NATS subscription and starts the task that reads it.
async fn subscribe(
    link: &Link,
    subscription: NatsSubscription,
    inbound: mpsc::Sender<(Scope, async_nats::Message)>,
) -> Option<AbortHandle> {
    let subject = subscription.subject.clone();
    let subscribed = match subscription.queue {
        Some(queue) => link.client.queue_subscribe(subject.clone(), queue).await,
        None => link.client.subscribe(subject.clone()).await,
    };
    let mut subscriber = match subscribed {
        Ok(subscriber) => subscriber,
        Err(e) => {
            error!(subject, error = %e, "cluster: NATS subscription failed");
            return None;
        }
    };
    debug!(subject, "cluster: subscribed");
    let scope = subscription.scope;
    let task = tokio::spawn(async move {
        while let Some(message) = subscriber.next().await {
            if inbound.send((scope.clone(), message)).await.is_err() {
                break;
            }
        }
    });
    Some(task.abort_handle())
}

/// Hands NATS messages to the shards: duplicates (one message matching several of this
/// node's plain subscriptions) dropped, the rest posted in batches, one per shard.
async fn inbound(
    link: Arc<Link>,
    mut messages: mpsc::Receiver<(Scope, async_nats::Message)>,
    poster: Poster<ShardMsg>,
) {
    let mut seen = Seen::default();
    let shards = poster.shard_count().max(1);
    let mut batches: Vec<Vec<ShardMsg>> = (0..shards).map(|_| Vec::new()).collect();
    while let Some(first) = messages.recv().await {
        let mut next = Some(first);
        let mut taken = 0;
        while let Some((scope, message)) = next.take() {
            taken += 1;
            if let Some(publish) = accept(&link, &mut seen, scope, message) {
                let shard = shard_of(publish.topic.as_str(), shards);
                batches[shard].push(ShardMsg::Cluster(Box::new(publish)));
            }
            if taken < INBOUND_BATCH {
                next = messages.try_recv().ok();
            }
        }
        post_batches(&link.counters, &poster, &mut batches);
    }
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
        Ok(Some(publish)) => Some(publish),
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
    if scope == Scope::Plain && !seen.first(headers::origin(headers)?) {
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

/// Posts each shard's batch; a full mailbox drops its batch, counted.
fn post_batches(
    counters: &ClusterCounters,
    poster: &Poster<ShardMsg>,
    batches: &mut [Vec<ShardMsg>],
) {
    for (index, batch) in batches.iter_mut().enumerate() {
        if batch.is_empty() {
            continue;
        }
        let messages = std::mem::take(batch);
        let count = messages.len() as u64;
        match poster.post(ShardId::new(index as u16), messages) {
            Ok(()) => ClusterCounters::add(&counters.messages_in, count),
            Err(_) => {
                warn!(
                    shard = index,
                    count, "cluster: shard mailbox full, messages from the cluster dropped"
                );
                ClusterCounters::add(&counters.dropped_inbound, count);
            }
        }
    }
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
    fn one_topic_always_goes_to_one_shard() {
        assert_eq!(shard_of("a/b", 4), shard_of("a/b", 4));
        assert!(shard_of("a/b", 4) < 4);
    }
}
