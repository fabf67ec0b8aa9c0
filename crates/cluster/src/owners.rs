//! [`Owners`]: what the claim tasks share (the link, the buckets once open, the shards'
//! inbox), and what they do with it: claim a client id for this node, answer the CONNECT
//! waiting for it, release a session another node takes over. `ownership.rs` runs the tasks.

use super::counters::ClusterCounters;
use super::follow_up::FollowFrom;
use super::link_state::{Link, same_node};
use super::mirror::Mirror;
use super::missed::session_subjects;
use super::owner_record::{Taken, take_record};
use super::release_wire::{decode_release, follow_from_of};
use super::retained_value::key_of;
use crate::Inbox;
use async_nats::connection::State;
use async_nats::jetstream::kv;
use broker_api::cluster::{ClaimRequest, Ownership, OwnershipAnswer, ReleaseRequest};
use broker_api::{ClusterInbound, Reply};
use bytes::{BufMut, Bytes, BytesMut};
use ring_runtime::ShardId;
use session_store::storage::decode_session_snapshot;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{OnceCell, oneshot};
use tracing::{debug, info, warn};

/// Attempts of one claim against concurrent changes of the owner record.
const CLAIM_ATTEMPTS: usize = 5;

/// How long an owner has to release a session (its shards answer within a turn or two).
pub(super) const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);
/// A released session's follow-up reads from this long before the release request: a message
/// the stream kept a moment before it may reach the owner only after the owner released the
/// session (delivery lag; the clocks of the nodes and the NATS servers differ).
pub(super) const RELEASED_MARGIN: Duration = Duration::from_secs(1);

/// A shard's answer to the end of a stale copy (`end_stale`; nothing, with a clean start).
pub(super) type StaleEnd = Option<Vec<u8>>;

/// Why a client id went unchecked when NATS did not read or create its owner record in time.
const NO_ANSWER: &str = "a client id was not checked across nodes (NATS did not answer)";

/// The buckets, once open.
pub(super) struct Buckets {
    pub(super) sessions: kv::Store,
    pub(super) nodes: kv::Store,
    pub(super) mirror: Mirror,
    /// The nodes' "alive at" stamps (`alive.rs`).
    pub(super) alive: kv::Store,
}

/// What the claim tasks share.
pub(super) struct Owners {
    pub(super) link: Arc<Link>,
    pub(super) buckets: OnceCell<Buckets>,
    pub(super) poster: Inbox,
    /// Client ids being claimed here, or claimed a moment ago (`claiming.rs`).
    pub(super) claiming: super::claiming::Claiming,
    /// The last heartbeat seen of each node run (where a dead node's sessions replay from).
    pub(super) last_beats: super::missed::LastBeats,
    /// The follow-ups of recovered sessions whose claims are not answered yet.
    pub(super) follow_ups: super::follow_up::FollowUps,
    /// The catch-up of the sessions recovered from this node's store (`restart.rs`).
    pub(super) restart: super::restart::Restart,
    /// Sessions released to other nodes a moment ago (`released.rs`).
    pub(super) released: super::released::Released,
    /// What a release waits on for the mirror writes queued before it (`mirror_queue.rs`).
    pub(super) mirror_fence: super::mirror_queue::MirrorFence,
    /// How long a claim may take: `connection.connect_timeout` less a margin for the
    /// CONNACK (a recovered session's read before it ends by then).
    pub(super) claim_budget: Duration,
    /// `queues.max_queued_messages`: the most copies a recovered session's queue holds.
    pub(super) max_queued: usize,
    /// `cluster.admit_unchecked_sessions`: a CONNECT that keeps a session is admitted when its
    /// client id cannot be checked (`true`), or refused (`false`, the default).
    pub(super) admit_unchecked_sessions: bool,
    /// The queue from the NATS subscriptions' readers to the inbound task.
    pub(super) inbound: super::inbound_drain::InboundQueue,
}

/// The subject on which the node run `origin` (`<node_id>/<nonce>`) answers release requests.
pub(super) fn release_subject(prefix: &str, origin: &str) -> String {
    format!("{prefix}.node.{}.release", origin.replace('/', "."))
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

/// A claim whose CONNECT's connection closed meanwhile (the client gave up waiting) stops
/// before it takes anything more: asked on, it would take the session from wherever the
/// client connected since. The 300-fault run of seed 5050 on 723f253 (994.1 s), as read from
/// the nodes' logs: a claim its client gave up after 5 s recovered a dead node's session, lost
/// the owner record to that node's restart, where the client had connected meanwhile, and went
/// on to take the session from there; the subscriber lost 226 to 252 of each publisher's
/// messages around those moves.
fn abandoned(claim: &ClaimRequest) -> Ownership {
    info!(client = %claim.client_id, "cluster: a claim stopped: its client closed the connection while it waited");
    Ownership::Unavailable
}

/// A claim that ran out of its time (`connection.connect_timeout` less 1 s) before it took
/// anything: refused (0x88, the client retries) rather than left to the CONNECT's timeout,
/// which closes the connection without a CONNACK (a CI run saw that once, right after a
/// frozen NATS server resumed: its reads and requests slow, the heartbeat read unbounded).
fn out_of_time(claim: &ClaimRequest) -> Ownership {
    info!(client = %claim.client_id, "cluster: CONNECT refused (0x88): its claim ran out of time");
    Ownership::Unavailable
}

/// The heartbeat key of the node run `origin`.
pub(super) fn heartbeat_key(origin: &str) -> String {
    origin.replace('/', ".")
}

impl Owners {
    /// Takes `claim`'s client id for this node run, by `deadline` (`connection.connect_timeout`
    /// less a margin for the CONNACK, from the claim's arrival).
    pub(super) async fn claim(&self, claim: &ClaimRequest, deadline: Instant) -> Ownership {
        let connected = self.link.client.connection_state() == State::Connected;
        let buckets = match connected {
            true => self.opened_buckets().await,
            false => None,
        };
        let Some(buckets) = buckets else {
            return self.unchecked(
                claim,
                "a client id was not checked across nodes (NATS down or no ownership bucket)",
            );
        };
        let key = key_of(claim.client_id.as_str());
        let own = Bytes::from(self.link.origin.clone());
        // A session recovered from this node's store: its record is settled first (a stale
        // copy ended), so a session another node releases never meets it on the shards.
        let within = deadline.saturating_duration_since(Instant::now());
        if !self.restart.settled(claim.client_id.as_str(), within).await {
            return Ownership::Unavailable;
        }
        for _ in 0..CLAIM_ATTEMPTS {
            if claim.is_abandoned() {
                return abandoned(claim);
            }
            if Instant::now() >= deadline {
                return out_of_time(claim);
            }
            let read_within =
                RELEASE_TIMEOUT.min(deadline.saturating_duration_since(Instant::now()));
            let read = tokio::time::timeout(read_within, buckets.sessions.entry(key.clone()));
            let entry = match read.await {
                Ok(Ok(entry)) => entry.filter(|e| e.operation == kv::Operation::Put),
                failed => {
                    debug!(?failed, "cluster: owner record not read");
                    return self.unchecked(claim, NO_ANSWER);
                }
            };
            let Some(entry) = entry else {
                match create_owner_record(buckets, &key, own.clone()).await {
                    Created::Here => return Ownership::Owned(None),
                    Created::ByAnotherNode => continue,
                    Created::NoAnswer => return self.unchecked(claim, NO_ANSWER),
                }
            };
            let owner = String::from_utf8_lossy(&entry.value).into_owned();
            if same_node(&owner, &self.link.origin) {
                // This run, or an earlier run of this node (its sessions came back from its
                // own store): the local takeover rules apply; the record names this run now.
                // A session this node released a moment ago whose claim did not take the
                // record (its reply lost, say): it resumes here from the snapshot kept.
                let again = match claim.clean_start {
                    true => None,
                    false => self.released.again_since(claim.client_id.as_str()),
                };
                // With compare-and-set: another node claiming the id from the dead earlier
                // run may have replaced the record since it was read; then read it again. With
                // a kept snapshot the record is written even if it names this run, so that the
                // claim it was released to, if it still holds it, loses the record.
                if (entry.value != own || again.is_some())
                    && buckets
                        .sessions
                        .update(&key, own.clone(), entry.revision)
                        .await
                        .is_err()
                {
                    continue;
                }
                if !claim.clean_start {
                    self.await_catch_up(claim.client_id.as_str(), deadline)
                        .await;
                }
                self.released.forget(claim.client_id.as_str());
                let Some((snapshot, released_at)) = again else {
                    return Ownership::Owned(None);
                };
                warn!(client = %claim.client_id, "cluster: a session released a moment ago did not reach the node that asked for it; it resumes here");
                // What came for it here from its release until it is back reached no session:
                // its follow-up reads it back (the fault run of seed 4848 lost 0.5 s of it).
                self.follow_released(claim, &snapshot, (released_at, None));
                return Ownership::Owned(Some(snapshot));
            }
            if claim.is_abandoned() {
                return abandoned(claim);
            }
            if Instant::now() >= deadline {
                return out_of_time(claim);
            }
            let asked = (owner.as_str(), deadline);
            let Some(session) = self.release_from(buckets, asked, claim).await else {
                return Ownership::Unavailable;
            };
            let taken = take_record(
                &buckets.sessions,
                &key,
                &own,
                (entry.revision, RELEASE_TIMEOUT),
            );
            if taken.await == Taken::Here {
                ClusterCounters::add(&self.link.counters.sessions_taken_over, 1);
                self.released.forget(claim.client_id.as_str());
                // What was mirrored of a session it brings stays until its shard's first
                // write of it replaces that (`mirror_imported`); with none, it goes now.
                if session.is_none() {
                    self.forget_mirrored(claim, deadline).await;
                }
                return Ownership::Owned(session);
            }
            if session.is_some() {
                warn!(client = %claim.client_id, "cluster: a session released to this node was claimed by another meanwhile (or its owner record could not be written); its state is dropped");
            }
        }
        Ownership::Unavailable
    }

    /// Queues the removal of what is mirrored of `claim`'s client id (a claim that brings no
    /// session) behind the mirror writes queued before it (the new session's own writes come
    /// after the claim's answer), waiting for room until `deadline` at the latest. Not
    /// awaited to the end:
    /// while JetStream elects new leaders a purge takes up to its 10 s timeout, and a CONNECT
    /// waiting for it outlasted `connection.connect_timeout` (a CI run: closed without a
    /// CONNACK, the client's next CONNECT found its session not installed yet).
    async fn forget_mirrored(&self, claim: &ClaimRequest, deadline: Instant) {
        let within = deadline.saturating_duration_since(Instant::now());
        if !self
            .mirror_fence
            .forget(claim.client_id.clone(), within)
            .await
        {
            warn!(client = %claim.client_id, "cluster: the mirror queue is full; what was mirrored of a session taken over stays until the client leaves again");
        }
    }

    /// Holds a CONNECT (without Clean Start) of a session recovered from this node's store
    /// until what it missed while the node was down is queued (`restart.rs`), at most until
    /// `deadline`: then it resumes, and those messages reach it once routed.
    async fn await_catch_up(&self, client_id: &str, deadline: Instant) {
        let within = deadline.saturating_duration_since(Instant::now());
        if !self.restart.caught_up(client_id, within).await {
            warn!(
                client = client_id,
                "cluster: a session recovered from the store resumes before what it missed while this node was down is queued"
            );
        }
    }

    /// A CONNECT whose client id could not be checked across nodes (`why` says what kept the
    /// check from happening, in the warning): refused (0x88, counted) when it resumes a
    /// session or leaves one behind, unless `cluster.admit_unchecked_sessions`; else admitted
    /// (counted). Why refused: the node the owner record names may hold the session; admitted
    /// here too, the two copies diverge, and the client resuming the stale one later gets
    /// again what it had and misses what the other copy held (the 300-fault run of seed 5050
    /// lost 629 acknowledged messages and repeated over 46,000 so, from two admissions while NATS
    /// did not answer). The client retries and, once NATS answers, resumes the one session.
    fn unchecked(&self, claim: &ClaimRequest, why: &'static str) -> Ownership {
        let counters = &self.link.counters;
        if claim.keeps_session && !self.admit_unchecked_sessions {
            if let Some(count) = ClusterCounters::count_one_to_warn(&counters.ownership_refused) {
                warn!(count, client = %claim.client_id, "cluster: CONNECT refused (0x88): {why}; the session may be held by another node");
            }
            return Ownership::Unavailable;
        }
        if let Some(count) = ClusterCounters::count_one_to_warn(&counters.ownership_unchecked) {
            warn!(count, client = %claim.client_id, "cluster: CONNECT admitted: {why}");
        }
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

    /// Ends a stale recovered copy of `client_id`'s session on its shard; answered once ended
    /// (`None`: not posted).
    pub(super) fn end_stale(&self, client_id: String) -> Option<oneshot::Receiver<StaleEnd>> {
        let Ok(client_id) = codec::MqttStr::try_from(client_id) else {
            return None;
        };
        let (reply, ended) = oneshot::channel();
        let request = ReleaseRequest {
            client_id,
            clean_start: true,
            reply: Reply::new(move |answer| reply.send(answer)),
            hops: 0,
        };
        let message = ClusterInbound::Release(Box::new(request));
        self.poster.post(ShardId::new(0), vec![message]).ok()?;
        Some(ended)
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
    /// answer. A dead owner (no heartbeat) releases nothing: its session comes back from the
    /// mirror, with what it missed read by `deadline`.
    async fn release_from(
        &self,
        buckets: &Buckets,
        (owner, deadline): (&str, Instant),
        claim: &ClaimRequest,
    ) -> Option<Option<Bytes>> {
        let subject = release_subject(&self.link.prefix, owner);
        let mut payload = BytesMut::with_capacity(1 + claim.client_id.len());
        payload.put_u8(u8::from(claim.clean_start));
        payload.put_slice(claim.client_id.as_bytes());
        let asked_at = SystemTime::now();
        let asked = self.link.client.request(subject, payload.freeze());
        let within = RELEASE_TIMEOUT.min(deadline.saturating_duration_since(Instant::now()));
        match tokio::time::timeout(within, asked).await {
            Ok(Ok(reply)) => {
                let released = decode_release(&reply.payload);
                if let Some(snapshot) = &released {
                    let from = (asked_at, follow_from_of(&reply));
                    self.follow_released(claim, snapshot, from);
                }
                Some(released)
            }
            _ if claim.is_abandoned() => {
                abandoned(claim);
                None
            }
            _ => match self.heartbeat_of(buckets, owner, deadline).await {
                Ok(Some(_)) => {
                    warn!(owner, client = %claim.client_id, "cluster: the session's node is alive but did not release it");
                    None
                }
                _ => Some(self.recover_dead(buckets, (owner, deadline), claim).await),
            },
        }
    }

    /// A session a live node (or this run, whose claim did not take it) released to `claim`: once the claim is answered, its follow-up (`follow_up.rs`) routes
    /// to it what the stream kept on its subjects from [`RELEASED_MARGIN`] before the request
    /// (`asked_at`, or the release), or from where the releasing node's own follow-up of the
    /// session, not done yet, starts (`carried`, when earlier), until the session is in place
    /// here. Why `carried`: a node that recovered a dead node's session and released it before
    /// its follow-up was done routes that follow-up to no one (the 300-fault run of seed 5050
    /// lost 6 s of one subscriber's messages so: its recovery read timed out and the client,
    /// retrying elsewhere, took the session away at once). Why: the owner ended
    /// the session when the request reached it, and what was published from then until this
    /// node's NATS subscriptions for it took effect reached neither node for it (NATS core is
    /// at most once; the fault run of seed 23 lost messages acknowledged in such a move, off
    /// a node restarted with its store). What the session had already comes again at QoS 1;
    /// at QoS 2 the delivery journals leave it out.
    fn follow_released(
        &self,
        claim: &ClaimRequest,
        snapshot: &Bytes,
        (asked_at, carried): (SystemTime, Option<SystemTime>),
    ) {
        if claim.clean_start || self.link.replays.stream.get().is_none() {
            return; // Nothing to follow up, or nothing kept.
        }
        let Ok(session) = decode_session_snapshot(snapshot) else {
            return; // The shard logs it and starts the client afresh.
        };
        let subjects = session_subjects(&self.link.prefix, &session);
        let from = asked_at.checked_sub(RELEASED_MARGIN).unwrap_or(asked_at);
        let from = carried.map_or(from, |carried| carried.min(from));
        let start = FollowFrom {
            from,
            already: std::collections::HashSet::new(),
            read_qos2: Vec::new(),
        };
        self.follow_ups.prepare(session.client_id, subjects, start);
    }

    /// `owner`'s heartbeat record, read by `deadline` at the latest (at least 1 s given). A
    /// read that does not come in that time counts as a heartbeat (the owner alive); a read
    /// that fails is an error (the caller then takes the owner for dead, as before the bound).
    async fn heartbeat_of(
        &self,
        buckets: &Buckets,
        owner: &str,
        deadline: Instant,
    ) -> Result<Option<Bytes>, ()> {
        let within = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        match tokio::time::timeout(within, buckets.nodes.get(heartbeat_key(owner))).await {
            Ok(Ok(record)) => Ok(record),
            Ok(Err(e)) => {
                debug!(error = %e, "cluster: heartbeat not read");
                Err(())
            }
            Err(_) => Ok(Some(Bytes::new())),
        }
    }

    /// Posts a claim's outcome to the shard that waits for it.
    pub(super) fn answer(&self, claim: ClaimRequest, outcome: Ownership) {
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
}
