//! Client id ownership across nodes (docs/cluster.md, "Sessions across nodes"): a JetStream
//! key-value bucket names the node run that owns each client id's session; a CONNECT on
//! another node takes it over by asking the owner to release the session (the old connection
//! closes with 0x8E, its state comes back in one snapshot) and then replacing the owner with
//! compare-and-set. Each node also keeps a heartbeat key (a bucket whose records expire after
//! `cluster.node_timeout_ms`): an owner that does not answer and has no heartbeat is dead, and
//! its client ids are taken without a session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures_util::StreamExt;

use crate::Inbox;
use tokio::sync::{OnceCell, Semaphore, mpsc};
use tracing::{debug, info, warn};

use super::alive::AliveStamp;
use super::buckets::{bucket_base, kv_stream, open_kv};
use super::counters::ClusterCounters;
use super::link_state::Link;
use super::mirror::Mirror;
use super::mirror_queue::{MirrorFence, MirrorWork};
use super::owners::{Buckets, Owners, heartbeat_key, release_subject};
use super::release_serving::earliest;
use super::restart::{Routing, route_missed};
use super::totals::{FiguresSource, NodeContext, heartbeat_value, sum_totals};
use broker_api::cluster::{ClaimRequest, Ownership};
use session_store::storage::{StoredKeys, StoredSession};

/// Claims worked on at once (each waits on NATS round trips).
const CONCURRENT_CLAIMS: usize = 256;
/// What a claim leaves of `connection.connect_timeout` for the CONNACK to leave.
const CONNACK_MARGIN: Duration = Duration::from_secs(1);
/// Wait between attempts to open the buckets.
const RETRY: Duration = Duration::from_secs(2);

/// What ownership needs beyond the link.
pub(super) struct Setup {
    pub(super) node_timeout: Duration,
    pub(super) replicas: usize,
    pub(super) node: NodeContext,
    /// The shards' mirror operations (`cluster/mirror.rs`).
    pub(super) mirror_ops: mpsc::Receiver<MirrorWork>,
    /// What a release waits on for the mirror writes queued before it.
    pub(super) mirror_fence: MirrorFence,
    /// Whether QoS 1/2 messages are kept in the replay stream (`replay_window_ms` above 0).
    pub(super) kept_stream: bool,
    /// `cluster.admit_unchecked_sessions`.
    pub(super) admit_unchecked_sessions: bool,
    /// The queue from the NATS subscriptions' readers to the inbound task (a release waits
    /// for it to drain).
    pub(super) inbound: super::inbound_drain::InboundQueue,
}

/// Runs ownership: opens the buckets and keeps the heartbeat, answers other nodes' release
/// requests, and works on the shards' claims until the thread stops.
pub(super) async fn ownership(
    link: Arc<Link>,
    mut claims: mpsc::Receiver<ClaimRequest>,
    poster: Inbox,
    setup: Setup,
) {
    let owners = Arc::new(Owners {
        link,
        buckets: OnceCell::new(),
        poster,
        claiming: super::claiming::Claiming::default(),
        last_beats: super::missed::LastBeats::default(),
        follow_ups: super::follow_up::FollowUps::default(),
        restart: super::restart::Restart::new(&setup.node.recovered),
        released: super::released::Released::default(),
        mirror_fence: setup.mirror_fence,
        max_queued: usize::try_from(setup.node.max_queued).unwrap_or(usize::MAX),
        claim_budget: setup.node.connect_timeout.saturating_sub(CONNACK_MARGIN),
        admit_unchecked_sessions: setup.admit_unchecked_sessions,
        inbound: setup.inbound,
    });
    let heartbeat = Heartbeat {
        every: setup.node_timeout / 3,
        node_timeout: setup.node_timeout,
        replicas: setup.replicas,
        max_queued: setup.node.max_queued,
        figures: setup.node.figures,
        kept_stream: setup.kept_stream,
    };
    tokio::spawn(keep_buckets(Arc::clone(&owners), heartbeat));
    tokio::spawn(catch_up(
        Arc::clone(&owners),
        (setup.node.recovered, setup.node.stored_keys),
        setup.kept_stream,
    ));
    tokio::spawn(super::lifecycle::mirror_offline_sessions(
        Arc::clone(&owners),
        setup.mirror_ops,
    ));
    tokio::spawn(serve_releases(Arc::clone(&owners)));
    let limit = Arc::new(Semaphore::new(CONCURRENT_CLAIMS));
    while let Some(claim) = claims.recv().await {
        let Ok(permit) = Arc::clone(&limit).acquire_owned().await else {
            break;
        };
        let owners = Arc::clone(&owners);
        tokio::spawn(async move {
            let deadline = Instant::now() + owners.claim_budget;
            if !owners
                .claiming
                .begin(claim.client_id.as_str(), deadline)
                .await
            {
                info!(client = %claim.client_id, "cluster: CONNECT refused (0x88): an earlier claim of its client id here did not end in time, or a later CONNECT of it came");
                owners.answer(claim, Ownership::Unavailable);
                drop(permit);
                return;
            }
            let outcome = owners.claim(&claim, deadline).await;
            let (client_id, shard) = (claim.client_id.clone(), claim.shard);
            let won = matches!(outcome, Ownership::Owned(_));
            // The answer first: a release request sent after `answered` queues behind it.
            owners.answer(claim, outcome);
            owners.claiming.answered(client_id.as_str(), shard, won);
            let (link, poster) = (&owners.link, &owners.poster);
            owners
                .follow_ups
                .answered(client_id.as_str(), won, link, poster);
            drop(permit);
        });
    }
}

/// Checks the sessions recovered from the store against the owner records (those another
/// node took over meanwhile end here), then routes to the others what they missed while the
/// node was down (`kept_stream`: `replay_window_ms` above 0; `restart.rs`), leaving out what
/// their stores hold (`stored_keys`). Claims and releases of them wait until this ends.
async fn catch_up(
    owners: Arc<Owners>,
    (recovered, stored_keys): (Vec<StoredSession>, StoredKeys),
    kept_stream: bool,
) {
    let ours = super::lifecycle::reconcile(&owners, recovered).await;
    owners.restart.settle();
    if kept_stream && !ours.is_empty() {
        let routing = Routing {
            poster: &owners.poster,
            max_queued: owners.max_queued,
            stored_keys,
        };
        route_missed(&owners.restart, &owners.link, routing, &ours).await;
    }
    owners.link.replays.live_keys.stop();
    owners.restart.end();
}

/// What the heartbeat needs.
struct Heartbeat {
    every: Duration,
    node_timeout: Duration,
    replicas: usize,
    max_queued: u64,
    figures: FiguresSource,
    /// `replay_window_ms` above 0: the replay stream keeps messages, and replays read it.
    kept_stream: bool,
}

/// Opens (creating if missing) both buckets, then puts this node's heartbeat (its figures)
/// every third of the node timeout, forever, and sums the cluster's totals after each.
async fn keep_buckets(owners: Arc<Owners>, heartbeat: Heartbeat) {
    let link = &owners.link;
    let js = jetstream::new(link.client.clone());
    let base = bucket_base(&link.prefix);
    let replicas = heartbeat.replicas;
    let sessions = open(&js, &format!("{base}_sessions"), replicas, None).await;
    let max_age = Some(heartbeat.node_timeout);
    let nodes = open(&js, &format!("{base}_nodes"), replicas, max_age).await;
    let per_client = i64::try_from(heartbeat.max_queued).unwrap_or(i64::MAX);
    let mirror = loop {
        match Mirror::open(&js, &base, &link.prefix, replicas, per_client).await {
            Ok(mirror) => break mirror,
            Err(e) => {
                debug!(error = %e, "cluster: offline mirror not open yet");
                tokio::time::sleep(RETRY).await;
            }
        }
    };
    let alive = AliveStamp::new(
        open(&js, &format!("{base}_alive"), replicas, None).await,
        &link.origin,
    );
    owners.restart.set_previous(alive.previous().await);
    let key = heartbeat_key(&link.origin);
    let _ = owners.buckets.set(Buckets {
        sessions,
        nodes: nodes.clone(),
        mirror,
        alive: alive.bucket().clone(),
    });
    info!("cluster: session ownership buckets open");
    ClusterCounters::set(&link.counters.ownership_ready, 1);
    let mut beat = tokio::time::interval(heartbeat.every);
    loop {
        beat.tick().await;
        // Without the replay stream no replay runs, so no request is ever done: nothing can
        // be read back from a start carried in the heartbeat either. With it, the start of
        // what this node may not have routed yet: its replays due, the follow-ups of the
        // sessions that came here, not done yet (`follow_up.rs`), and the catch-up of the
        // sessions recovered from its store, not ended yet (`restart.rs`).
        let unreplayed_from = match heartbeat.kept_stream {
            true => earliest(
                earliest(
                    link.replays.unreplayed_from(),
                    owners.follow_ups.earliest_unfinished(),
                ),
                owners.restart.unfinished_from(),
            ),
            false => None,
        };
        let value = Bytes::from(heartbeat_value(&(heartbeat.figures)(), unreplayed_from));
        if let Err(e) = nodes.put(&key, value).await {
            debug!(error = %e, "cluster: heartbeat not written");
        }
        alive.put(unreplayed_from).await;
        let beats = sum_totals(&nodes, &link.counters, &key).await;
        owners.last_beats.seen(beats);
    }
}

/// A key-value bucket (`max_age`: records expire after it), created if missing; retried until
/// JetStream answers.
async fn open(
    js: &jetstream::Context,
    bucket: &str,
    replicas: usize,
    max_age: Option<Duration>,
) -> kv::Store {
    let mut warned = false;
    loop {
        match open_kv(js, bucket, kv_stream(bucket, replicas, max_age)).await {
            Ok(store) => return store,
            Err(e) if !warned => {
                warned = true;
                warn!(bucket, error = %e, "cluster: bucket not available (is JetStream enabled on the NATS servers?); client ids are not checked across nodes until it is (a persistent session's CONNECT is refused with 0x88 meanwhile, unless cluster.admit_unchecked_sessions)");
            }
            Err(e) => debug!(bucket, error = %e, "cluster: bucket still not available"),
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Answers other nodes' requests to release a session held here.
async fn serve_releases(owners: Arc<Owners>) {
    let link = &owners.link;
    let subject = release_subject(&link.prefix, &link.origin);
    let mut requests = loop {
        match link.client.subscribe(subject.clone()).await {
            Ok(requests) => break requests,
            Err(e) => {
                warn!(error = %e, "cluster: release subscription failed; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    };
    while let Some(request) = requests.next().await {
        let owners = Arc::clone(&owners);
        tokio::spawn(async move { owners.release(request).await });
    }
}
