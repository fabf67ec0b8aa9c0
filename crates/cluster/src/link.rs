//! The cluster thread: a NATS client on a single-threaded tokio runtime of its own.
//!
//! Three loops share the one client: outbound (the shards' queue to NATS), interest (local
//! subscriptions to NATS subscriptions, each read by a small task) and inbound (NATS
//! messages, duplicates dropped, posted to the shards in batches: `inbound.rs`).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::thread::JoinHandle;

use async_nats::{Client, ConnectOptions, Event};
use broker_api::redact_url;
use futures_util::StreamExt;
use ring_runtime::Clock;

use crate::Inbox;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tracing::{debug, error, info, warn};

use super::interest::{Action, InterestTable, NatsSubscription};
use super::interest_queue::InterestQueue;
use super::link_state::Link;
use super::reliable;
use super::replays::{Replays, Window};
use super::subject::{Root, message_root};
use super::totals::NodeContext;
use super::{ClusterCounters, ClusterQueues, Interest, Scope};
use crate::settings::ClusterSettings;

/// NATS messages read but not yet handed to a shard (the subscription readers wait beyond).
const INBOUND_CAPACITY: usize = 4096;

/// The running cluster thread.
#[derive(Debug)]
pub struct ClusterThread {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ClusterThread {
    /// Starts the thread; it connects (and reconnects) to NATS in the background.
    pub fn start(
        settings: ClusterSettings,
        queues: ClusterQueues,
        counters: Arc<ClusterCounters>,
        poster: Inbox,
        clock: Clock,
        node: NodeContext,
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
                        () = run(settings, queues, counters, poster, clock, node) => {}
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
    poster: Inbox,
    clock: Clock,
    mut node: NodeContext,
) {
    let replays = Arc::new(Replays::default());
    let connected = async {
        let events = Events {
            counters: Arc::clone(&counters),
            replays: Arc::clone(&replays),
        };
        let client = connect(&settings, events.clone(), Connection::Main).await?;
        let queue_client = connect(&settings, events, Connection::Queues).await?;
        Ok::<_, ConnectFailure>((client, queue_client))
    };
    let (client, queue_client) = match connected.await {
        Ok(clients) => clients,
        Err(e) => {
            error!(error = %e, "cluster: NATS client not started");
            return;
        }
    };
    let link = Arc::new(Link {
        client,
        queue_client,
        prefix: settings.subject_prefix.clone(),
        origin: format!("{}/{:016x}", settings.node_id, start_nonce()),
        counters,
        clock,
        replays,
        ack_timeout: settings.ack_timeout,
        retained_bucket: std::sync::OnceLock::new(),
    });
    let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_CAPACITY);
    let journal = (queues.journal, queues.journal_settled);
    let journaled = settings.qos2_journal;
    let replaying = {
        let (link, inbound) = (Arc::clone(&link), inbound_tx.clone());
        let window = settings.replay_window.map(|max_age| Window {
            max_age,
            max_bytes: settings.replay_max_bytes,
            replicas: settings.replicas,
            duplicates: reliable::duplicate_window(max_age, settings.ack_timeout),
        });
        async move {
            match window {
                Some(window) => {
                    tokio::join!(
                        reliable::replays(Arc::clone(&link), window, inbound),
                        super::journal_writer::write_journal(
                            Arc::clone(&link),
                            (window, journaled),
                            journal
                        ),
                        super::losses::losses(link)
                    );
                }
                None => std::future::pending().await,
            }
        }
    };
    let drain_queue = inbound_tx.clone();
    let (retained_tx, retained_rx) = mpsc::channel(settings.max_outbound_messages);
    let accepted_retained = std::mem::take(&mut node.accepted_retained);
    tokio::join!(
        super::outbound::outbound(
            Arc::clone(&link),
            queues.outbound,
            retained_tx,
            queues.settled
        ),
        interest(Arc::clone(&link), queues.interest, inbound_tx),
        super::retained::retained(
            Arc::clone(&link),
            retained_rx,
            poster.clone(),
            (settings.replicas, accepted_retained)
        ),
        super::ownership::ownership(
            Arc::clone(&link),
            queues.claims,
            poster.clone(),
            super::ownership::Setup {
                node_timeout: settings.node_timeout,
                replicas: settings.replicas,
                node,
                mirror_ops: queues.mirror,
                mirror_fence: queues.mirror_fence,
                kept_stream: settings.replay_window.is_some(),
                admit_unchecked_sessions: settings.admit_unchecked_sessions,
                inbound: drain_queue,
            }
        ),
        super::inbound::inbound(link, inbound_rx, poster),
        replaying,
    );
}

/// Which of the node's two NATS connections.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Connection {
    /// Publishes, plain subscriptions, buckets: never receives its own publishes; its
    /// connection state is logged and kept in the counters.
    Main,
    /// The queue subscriptions' (echo on; its connection events logged at debug level).
    Queues,
}

/// Where a NATS client's events go.
#[derive(Clone)]
struct Events {
    counters: Arc<ClusterCounters>,
    replays: Arc<Replays>,
}

/// A NATS client that reconnects forever; both count their slow-consumer events.
async fn connect(
    settings: &ClusterSettings,
    events: Events,
    which: Connection,
) -> Result<Client, ConnectFailure> {
    let servers: Vec<async_nats::ServerAddr> = settings
        .nats
        .iter()
        .filter_map(|url| url.parse().ok())
        .collect();
    let options = secured(
        ConnectOptions::new()
            .retry_on_initial_connect()
            .max_reconnects(None),
        &settings.security,
    )
    .await?;
    let options = match which {
        Connection::Main => {
            let shown: Vec<_> = settings.nats.iter().map(|url| redact_url(url)).collect();
            info!(node = %settings.node_id, servers = ?shown, "cluster: connecting to NATS");
            options
                .no_echo()
                .name(format!("ringmq-{}", settings.node_id))
        }
        Connection::Queues => options.name(format!("ringmq-{}-queues", settings.node_id)),
    };
    let options = options.event_callback(move |event| {
        let events = events.clone();
        async move { log_event(&events, which, event) }
    });
    Ok(options.connect(servers).await?)
}

/// `options` with the node's TLS settings and credentials (`[cluster]` `tls_*`, `creds_file`).
async fn secured(
    mut options: ConnectOptions,
    security: &crate::settings::NatsSecurity,
) -> Result<ConnectOptions, ConnectFailure> {
    if let Some(ca) = &security.tls_ca_file {
        options = options.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let Some((cert, key)) = &security.tls_client {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    if let Some(creds) = &security.creds_file {
        options = options
            .credentials_file(creds)
            .await
            .map_err(ConnectFailure::Credentials)?;
    }
    Ok(options)
}

/// Why the NATS client did not start.
#[derive(Debug, thiserror::Error)]
enum ConnectFailure {
    #[error("cluster.creds_file: {0}")]
    Credentials(std::io::Error),
    #[error(transparent)]
    Nats(#[from] async_nats::ConnectError),
}

fn log_event(events: &Events, which: Connection, event: Event) {
    let counters = &events.counters;
    if let Event::SlowConsumer(_) = event {
        events.replays.slow_consumer();
        ClusterCounters::drop_one(
            &counters.slow_consumer,
            "the NATS client had no room in a subscription's reader (slow consumer)",
        );
        return;
    }
    if which == Connection::Queues {
        debug!(event = %event, "cluster: queue connection");
        return;
    }
    match event {
        Event::Connected => {
            ClusterCounters::set(&counters.connected, 1);
            events.replays.connected();
            info!("cluster: connected to NATS");
        }
        Event::Disconnected => {
            ClusterCounters::set(&counters.connected, 0);
            ClusterCounters::add(&counters.nats_disconnects, 1);
            events.replays.disconnected();
            warn!(
                "cluster: disconnected from NATS (reconnecting; messages for the cluster wait in cluster.max_outbound_messages meanwhile, beyond it dropped and counted; QoS 1/2 publishes JetStream had not acknowledged are made again)"
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

/// Keeps the NATS subscriptions in step with local interest.
async fn interest(
    link: Arc<Link>,
    changes: Arc<InterestQueue>,
    inbound: mpsc::Sender<(Scope, async_nats::Message)>,
) {
    let mut table = InterestTable::default();
    let mut readers: HashMap<String, Vec<AbortHandle>> = HashMap::new();
    while let Some(batch) = changes.take().await {
        for change in batch {
            apply_interest(&link, &mut table, &mut readers, change, &inbound).await;
        }
        let held: usize = readers.values().map(Vec::len).sum();
        ClusterCounters::set(&link.counters.subscriptions, held as u64);
    }
}

/// Takes or drops the NATS subscriptions one net change of interest asks for.
async fn apply_interest(
    link: &Link,
    table: &mut InterestTable,
    readers: &mut HashMap<String, Vec<AbortHandle>>,
    change: Interest,
    inbound: &mpsc::Sender<(Scope, async_nats::Message)>,
) {
    match table.apply(&link.prefix, &change) {
        Action::Subscribe(subscriptions) => {
            let reliable_root = format!("{}.", message_root(&link.prefix, Root::Reliable));
            let replayed: Vec<String> = subscriptions
                .iter()
                .filter(|s| s.scope == Scope::Plain && s.subject.starts_with(&reliable_root))
                .map(|s| s.subject.clone())
                .collect();
            if !replayed.is_empty() {
                link.replays.set_interest(&change.filter, Some(replayed));
            }
            let mut handles = Vec::with_capacity(subscriptions.len());
            for subscription in subscriptions {
                if let Some(handle) = subscribe(link, subscription, inbound.clone()).await {
                    handles.push(handle);
                }
            }
            readers.insert(change.filter, handles);
        }
        Action::Unsubscribe => {
            link.replays.set_interest(&change.filter, None);
            for handle in readers.remove(&change.filter).into_iter().flatten() {
                // Dropping the reader drops its subscriber, which unsubscribes.
                handle.abort();
            }
        }
        Action::Nothing => {}
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
        Some(queue) => {
            let client = &link.queue_client;
            client.queue_subscribe(subject.clone(), queue).await
        }
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
