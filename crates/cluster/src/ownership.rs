//! Client id ownership across nodes (docs/cluster.md, "Sessions across nodes"): a JetStream
//! key-value bucket names the node run that owns each client id's session; a CONNECT on
//! another node takes it over by asking the owner to release the session (the old connection
//! closes with 0x8E, its state comes back in one snapshot) and then replacing the owner with
//! compare-and-set. Each node also keeps a heartbeat key (a bucket whose records expire after
//! `cluster.node_timeout_ms`): an owner that does not answer and has no heartbeat is dead, and
//! its client ids are taken without a session.

use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::{self, kv};
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::StreamExt;
use ring_runtime::ShardId;

use crate::Inbox;
use tokio::sync::{OnceCell, Semaphore, mpsc, oneshot};
use tracing::{debug, info, warn};

use super::buckets::{bucket_base, kv_stream, open_kv};
use super::counters::ClusterCounters;
use super::link::Link;
use super::mirror::Mirror;
use super::retained_value::key_of;
use super::totals::{FiguresSource, NodeContext, sum_totals};
use broker_api::cluster::{ClaimRequest, MirrorOp, Ownership, OwnershipAnswer, ReleaseRequest};
use broker_api::{ClusterInbound, Reply};

/// Claims worked on at once (each waits on NATS round trips).
const CONCURRENT_CLAIMS: usize = 256;
/// Attempts of one claim against concurrent changes of the owner record.
const CLAIM_ATTEMPTS: usize = 5;
/// How long an owner has to release a session (its shards answer within a turn or two).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);
/// Why a client id went unchecked when NATS did not read or create its owner record in time.
const NO_ANSWER: &str = "a client id was not checked across nodes (NATS did not answer)";
/// Wait between attempts to open the buckets.
const RETRY: Duration = Duration::from_secs(2);

/// The buckets, once open.
pub(super) struct Buckets {
    pub(super) sessions: kv::Store,
    nodes: kv::Store,
    pub(super) mirror: Mirror,
}

/// What ownership needs beyond the link.
pub(super) struct Setup {
    pub(super) node_timeout: Duration,
    pub(super) replicas: usize,
    pub(super) node: NodeContext,
    /// The shards' mirror operations (`cluster/mirror.rs`).
    pub(super) mirror_ops: mpsc::Receiver<MirrorOp>,
}

/// What the claim tasks share.
pub(super) struct Owners {
    pub(super) link: Arc<Link>,
    buckets: OnceCell<Buckets>,
    poster: Inbox,
    /// Client ids being claimed here, or claimed a moment ago (`claiming.rs`).
    claiming: super::claiming::Claiming,
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
    });
    let heartbeat = Heartbeat {
        every: setup.node_timeout / 3,
        node_timeout: setup.node_timeout,
        replicas: setup.replicas,
        max_queued: setup.node.max_queued,
        figures: setup.node.figures,
    };
    tokio::spawn(keep_buckets(Arc::clone(&owners), heartbeat));
    tokio::spawn(super::lifecycle::reconcile(
        Arc::clone(&owners),
        setup.node.recovered,
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
            owners.claiming.begin(claim.client_id.as_str());
            let outcome = owners.claim(&claim).await;
            let (client_id, shard) = (claim.client_id.clone(), claim.shard);
            let won = matches!(outcome, Ownership::Owned(_));
            // The answer first: a release request sent after `answered` queues behind it.
            owners.answer(claim, outcome);
            owners.claiming.answered(client_id.as_str(), shard, won);
            drop(permit);
        });
    }
}

/// The subject on which the node run `origin` (`<node_id>/<nonce>`) answers release requests.
fn release_subject(prefix: &str, origin: &str) -> String {
    format!("{prefix}.node.{}.release", origin.replace('/', "."))
}

/// Whether two node runs (`<node_id>/<nonce>`) are runs of the same node.
pub(super) fn same_node(a: &str, b: &str) -> bool {
    a.split('/').next() == b.split('/').next()
}

/// What became of an attempt to create a client id's owner record.
enum Created {
    /// The record names this node run.
    Here,
    /// Another node created it first: read it again.
    ByAnotherNode,
    /// JetStream did not confirm it within [`RELEASE_TIMEOUT`] (slow, or refused): the CONNECT
    /// goes on unchecked, as when the record cannot be read, rather than wait on.
    NoAnswer,
}

/// Creates `key`'s owner record naming `own`, waiting at most [`RELEASE_TIMEOUT`].
async fn create_owner_record(buckets: &Buckets, key: &str, own: Bytes) -> Created {
    let create = tokio::time::timeout(RELEASE_TIMEOUT, buckets.sessions.create(key, own));
    match create.await {
        Ok(Ok(_)) => Created::Here,
        Ok(Err(e)) if e.kind() == kv::CreateErrorKind::AlreadyExists => Created::ByAnotherNode,
        failed => {
            debug!(?failed, "cluster: owner record not created");
            Created::NoAnswer
        }
    }
}

/// The heartbeat key of the node run `origin`.
fn heartbeat_key(origin: &str) -> String {
    origin.replace('/', ".")
}

/// What the heartbeat needs.
struct Heartbeat {
    every: Duration,
    node_timeout: Duration,
    replicas: usize,
    max_queued: u64,
    figures: FiguresSource,
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
    let key = heartbeat_key(&link.origin);
    let _ = owners.buckets.set(Buckets {
        sessions,
        nodes: nodes.clone(),
        mirror,
    });
    info!("cluster: session ownership buckets open");
    ClusterCounters::set(&link.counters.ownership_ready, 1);
    let mut beat = tokio::time::interval(heartbeat.every);
    loop {
        beat.tick().await;
        let value = Bytes::from((heartbeat.figures)().encode());
        if let Err(e) = nodes.put(&key, value).await {
            debug!(error = %e, "cluster: heartbeat not written");
        }
        sum_totals(&nodes, &link.counters).await;
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
                warn!(bucket, error = %e, "cluster: bucket not available (is JetStream enabled on the NATS servers?); client ids are not checked across nodes until it is");
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

impl Owners {
    /// Takes `claim`'s client id for this node run.
    async fn claim(&self, claim: &ClaimRequest) -> Ownership {
        let connected = self.link.client.connection_state() == State::Connected;
        let buckets = match connected {
            true => self.opened_buckets().await,
            false => None,
        };
        let Some(buckets) = buckets else {
            return self.unchecked(
                "a client id was not checked across nodes (NATS down or no ownership bucket)",
            );
        };
        let key = key_of(claim.client_id.as_str());
        let own = Bytes::from(self.link.origin.clone());
        for _ in 0..CLAIM_ATTEMPTS {
            let read = tokio::time::timeout(RELEASE_TIMEOUT, buckets.sessions.entry(key.clone()));
            let entry = match read.await {
                Ok(Ok(entry)) => entry.filter(|e| e.operation == kv::Operation::Put),
                failed => {
                    debug!(?failed, "cluster: owner record not read");
                    return self.unchecked(NO_ANSWER);
                }
            };
            let Some(entry) = entry else {
                match create_owner_record(buckets, &key, own.clone()).await {
                    Created::Here => return Ownership::Owned(None),
                    Created::ByAnotherNode => continue,
                    Created::NoAnswer => return self.unchecked(NO_ANSWER),
                }
            };
            let owner = String::from_utf8_lossy(&entry.value).into_owned();
            if same_node(&owner, &self.link.origin) {
                // This run, or an earlier run of this node (its sessions came back from its
                // own store): the local takeover rules apply; the record names this run now.
                if entry.value != own {
                    let _ = buckets
                        .sessions
                        .update(&key, own.clone(), entry.revision)
                        .await;
                }
                return Ownership::Owned(None);
            }
            let Some(session) = self.release_from(buckets, &owner, claim).await else {
                return Ownership::Unavailable;
            };
            if buckets
                .sessions
                .update(&key, own.clone(), entry.revision)
                .await
                .is_ok()
            {
                ClusterCounters::add(&self.link.counters.sessions_taken_over, 1);
                // Whatever was mirrored of it is in the session now (or was released live).
                if let Err(e) = buckets.mirror.forget(claim.client_id.as_str()).await {
                    debug!(error = %e, "cluster: mirrored session not removed");
                }
                return Ownership::Owned(session);
            }
            if session.is_some() {
                warn!(client = %claim.client_id, "cluster: a session released to this node was claimed by another meanwhile; its state is dropped");
            }
        }
        Ownership::Unavailable
    }

    /// A CONNECT admitted without checking its client id across nodes (counted; `why` says
    /// what kept the check from happening, in the warning).
    fn unchecked(&self, why: &'static str) -> Ownership {
        ClusterCounters::drop_one(&self.link.counters.ownership_unchecked, why);
        Ownership::Owned(None)
    }

    /// The buckets, once open (`None` if the thread stops first).
    pub(super) async fn wait_for_buckets(&self) -> Option<&Buckets> {
        loop {
            if let Some(buckets) = self.buckets.get() {
                return Some(buckets);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Ends a stale recovered copy of `client_id`'s session on its shard.
    pub(super) fn end_stale(&self, client_id: String) {
        let Ok(client_id) = codec::MqttStr::try_from(client_id) else {
            return;
        };
        let (reply, _) = oneshot::channel();
        let request = ReleaseRequest {
            client_id,
            clean_start: true,
            reply: Reply::new(move |answer| reply.send(answer)),
            hops: 0,
            stale: true,
        };
        let message = ClusterInbound::Release(Box::new(request));
        let _ = self.poster.post(ShardId::new(0), vec![message]);
    }

    /// The buckets, waiting up to [`RELEASE_TIMEOUT`] for them to open (a node just started).
    async fn opened_buckets(&self) -> Option<&Buckets> {
        let deadline = tokio::time::Instant::now() + RELEASE_TIMEOUT;
        loop {
            if let Some(buckets) = self.buckets.get() {
                return Some(buckets);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Asks `owner` to release the session: `Some(state)` once released (`None` inside: it had
    /// none, or the client asked for a clean start); `None` when the owner is alive but does not
    /// answer. A dead owner (no heartbeat) releases nothing.
    async fn release_from(
        &self,
        buckets: &Buckets,
        owner: &str,
        claim: &ClaimRequest,
    ) -> Option<Option<Bytes>> {
        let subject = release_subject(&self.link.prefix, owner);
        let mut payload = BytesMut::with_capacity(1 + claim.client_id.len());
        payload.put_u8(u8::from(claim.clean_start));
        payload.put_slice(claim.client_id.as_bytes());
        let asked = self.link.client.request(subject, payload.freeze());
        match tokio::time::timeout(RELEASE_TIMEOUT, asked).await {
            Ok(Ok(reply)) => Some(decode_release(&reply.payload)),
            _ => match buckets.nodes.get(heartbeat_key(owner)).await {
                Ok(Some(_)) => {
                    warn!(owner, client = %claim.client_id, "cluster: the session's node is alive but did not release it");
                    None
                }
                _ => {
                    let mirrored = buckets.mirror.recover(claim.client_id.as_str()).await;
                    match &mirrored {
                        Some(_) => {
                            warn!(owner, client = %claim.client_id, "cluster: the session's node is gone; its session resumes here from the JetStream mirror");
                            ClusterCounters::add(&self.link.counters.sessions_recovered, 1);
                        }
                        None => {
                            warn!(owner, client = %claim.client_id, "cluster: the session's node is gone and nothing of it is mirrored; the client starts a new session here");
                            ClusterCounters::add(&self.link.counters.sessions_lost, 1);
                        }
                    }
                    Some(mirrored.filter(|_| !claim.clean_start))
                }
            },
        }
    }

    /// Posts a claim's outcome to the shard that waits for it.
    fn answer(&self, claim: ClaimRequest, outcome: Ownership) {
        let answer = OwnershipAnswer {
            conn: claim.conn,
            token: claim.token,
            client_id: claim.client_id,
            outcome,
        };
        let message = ClusterInbound::Ownership(Box::new(answer));
        if self.poster.post(claim.shard, vec![message]).is_err() {
            warn!(
                "cluster: a shard's mailbox is full; a CONNECT waiting for its session times out"
            );
        }
    }

    /// Releases the session another node asks for: the shards close its connection and hand
    /// back its state, which goes back as the reply.
    async fn release(&self, request: async_nats::Message) {
        let Some(reply_to) = request.reply.clone() else {
            return;
        };
        let reply = match parse_release(&request.payload) {
            Some((clean_start, client_id)) => self.release_here(client_id, clean_start).await,
            None => Bytes::from_static(&[0]),
        };
        if let Err(e) = self.link.client.publish(reply_to, reply).await {
            debug!(error = %e, "cluster: release reply not sent");
        }
    }

    /// Asks the shard where a CONNECT claimed `client_id` a moment ago, or else shard 0 (each
    /// forwards to the session's shard), to release `client_id`; the encoded reply.
    async fn release_here(&self, client_id: codec::MqttStr, clean_start: bool) -> Bytes {
        let shard = self.claiming.shard_for(client_id.as_str()).await;
        let (reply, released) = oneshot::channel();
        let request = ReleaseRequest {
            client_id,
            clean_start,
            reply: Reply::new(move |answer| reply.send(answer)),
            hops: 0,
            stale: false,
        };
        let message = ClusterInbound::Release(Box::new(request));
        let shard = shard.unwrap_or(ShardId::new(0));
        if self.poster.post(shard, vec![message]).is_err() {
            return Bytes::from_static(&[0]);
        }
        match tokio::time::timeout(RELEASE_TIMEOUT / 2, released).await {
            Ok(Ok(Some(snapshot))) => {
                ClusterCounters::add(&self.link.counters.sessions_released, 1);
                let mut out = BytesMut::with_capacity(1 + snapshot.len());
                out.put_u8(1);
                out.put_slice(&snapshot);
                out.freeze()
            }
            _ => Bytes::from_static(&[0]),
        }
    }
}

/// A release request's payload: `[clean start: 0 | 1][client id]`.
fn parse_release(payload: &[u8]) -> Option<(bool, codec::MqttStr)> {
    let (&flag, id) = payload.split_first()?;
    let text = std::str::from_utf8(id).ok()?;
    Some((flag == 1, codec::MqttStr::try_from(text).ok()?))
}

/// A release reply: `[0]` no session, `[1][snapshot]` the session's state.
fn decode_release(payload: &Bytes) -> Option<Bytes> {
    match payload.first() {
        Some(1) => Some(payload.slice(1..)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_and_keys_are_valid_nats_tokens() {
        assert_eq!(
            release_subject("ringmq", "n1/00ab"),
            "ringmq.node.n1.00ab.release"
        );
        assert_eq!(heartbeat_key("n-1/ff"), "n-1.ff");
        assert!(same_node("n1/00ab", "n1/ffff") && !same_node("n1/00ab", "n10/00ab"));
    }

    #[test]
    fn release_payloads_round_trip() {
        assert_eq!(
            parse_release(b"\x01dev-7"),
            Some((true, codec::MqttStr::try_from("dev-7").unwrap()))
        );
        assert_eq!(parse_release(b""), None);
        assert_eq!(decode_release(&Bytes::from_static(b"\x00")), None);
        assert_eq!(
            decode_release(&Bytes::from_static(b"\x01abc")),
            Some(Bytes::from_static(b"abc"))
        );
    }
}
