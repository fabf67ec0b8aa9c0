//! The sessions a node recovered from its own store when it starts again (docs/cluster.md,
//! "When a node restarts"). While it was down NATS delivered what the other nodes published to
//! no one for them, and what reached it just before it died may not have reached its clients or
//! its store; the replay stream `<base>_messages` kept those QoS 1/2 messages. So once the
//! recovered sessions' subscriptions are live in NATS again, the node reads the stream on
//! their subjects from [`MARGIN`] before its previous run's last "alive at" stamp
//! (`alive.rs`) up to the stream's last message, and routes each message to every recovered
//! session it matches, to that session alone (`Scope::Session`, as the follow-up of a dead
//! node's session does). A CONNECT or a release request of such a session waits for that,
//! bounded: the session is resumed, or handed to another node, with those messages queued.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use async_nats::jetstream::stream;
use codec::MqttStr;
use session_store::storage::{StoredKeys, StoredSession};
use tokio::sync::watch;
use tracing::{info, warn};

use super::alive::{PreviousRun, StampError};
use super::counters::ClusterCounters;
use super::follow_up::JOURNAL_SLACK;
use super::inbound::post_read_back;
use super::journal_read::{Deliveries, read_every_journal_record};
use super::journal_writer::journal_subject;
use super::link_state::Link;
use super::link_state::same_node;
use super::missed::{
    Kept, MARGIN, Plain, expires_at, matching, plain_subscriptions, read_kept_retried,
    sessions_subjects,
};
use super::retried::{Retries, retried};
use super::{ClusterPublish, Scope};
use crate::Inbox;

/// The longest the read of what the recovered sessions missed may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How the read is tried again before a node replay stands in: 4 tries, one a second. Why: a
/// node replay standing in for the read gives again what the previous run delivered (its
/// duplicate check knows nothing of it, and it consults neither the store nor the delivery
/// journals): in the 300-fault run of seed 5050 on 40c9782 (347.4 s) a node was frozen
/// (SIGSTOP) 2 s after its restart, its read timed out, and the replay gave one subscriber
/// 4,464 QoS 2 messages a second time. With each try taking up to [`READ_TIMEOUT`], release
/// requests of the recovered sessions are put off (0x88 to their claims) for at most about
/// 23 s; those that resume before get the messages once routed.
const READ_RETRIES: Retries = Retries {
    tries: 4,
    apart: Duration::from_secs(1),
    what: "the catch-up's read",
};
/// The longest the node waits for the replay stream to open and for the recovered sessions'
/// subscriptions to be taken in NATS (it reads anyway after that).
const SETUP_WAIT: Duration = Duration::from_secs(5);
/// The longest the node waits, once the stream was read, for the delivery journal's stream to
/// open (the routing goes on without the journals after that). Why not [`SETUP_WAIT`]: in the
/// 300-fault run of seed 5050 on be70a34 (1,030.1 s) a node restarted while JetStream was
/// unavailable; its read of the replay stream succeeded on a later try, the journal's stream
/// was not open 5 s after, and one subscriber got 260 QoS 2 messages the previous run had
/// delivered a second time.
const JOURNAL_OPEN_WAIT: Duration = Duration::from_secs(15);
/// How the read of the delivery journals is tried again.
const JOURNAL_RETRIES: Retries = Retries {
    tries: 4,
    apart: Duration::from_secs(1),
    what: "the catch-up's read of the delivery journals",
};
/// After the subscriptions are taken (and flushed): NATS spreads them over its routes within
/// it, so what is published after it reaches this node live.
const ROUTES_MARGIN: Duration = Duration::from_millis(500);
/// After the messages are posted: the shards route them into the sessions within it (a
/// release request then finds them queued).
const ROUTED_MARGIN: Duration = Duration::from_millis(250);
/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(50);

/// Where the catch-up of the sessions recovered from the store stands.
pub(super) struct Restart {
    /// The client ids recovered from the store: their claims and releases wait for the end.
    recovered: HashSet<String>,
    /// `true` once each recovered session was checked against its owner record (those
    /// another node owns ended here: `lifecycle::reconcile`).
    settled: watch::Sender<bool>,
    /// `true` once the catch-up has ended (routed, failed, or nothing to read).
    ended: watch::Sender<bool>,
    /// The previous run's stamp, once read (before this run puts its first).
    previous: OnceLock<Result<Option<PreviousRun>, StampError>>,
    /// The recovered sessions another node owns, until their copies here are ended: the
    /// mirror writes their shards queued for them are not made (`lifecycle.rs`).
    stale: Mutex<HashSet<String>>,
}

impl Restart {
    /// The catch-up of `recovered`, not begun.
    pub(super) fn new(recovered: &[StoredSession]) -> Self {
        let ids = recovered.iter().map(|s| s.client_id.as_str().to_owned());
        Self {
            recovered: ids.collect(),
            settled: watch::Sender::new(recovered.is_empty()),
            ended: watch::Sender::new(recovered.is_empty()),
            previous: OnceLock::new(),
            stale: Mutex::default(),
        }
    }

    /// The previous run's stamp was read (or not: `Err`).
    pub(super) fn set_previous(&self, read: Result<Option<PreviousRun>, StampError>) {
        let _ = self.previous.set(read);
    }

    /// Whether `client_id`'s session can be resumed or released: it was not recovered from
    /// the store, or the catch-up has ended; waits for the end up to `within`.
    pub(super) async fn caught_up(&self, client_id: &str, within: Duration) -> bool {
        self.recovered_and(client_id, &self.ended, within).await
    }

    /// Whether `client_id`'s owner record is settled: its session was not recovered from the
    /// store, or every recovered one was checked against its record (a stale one ended);
    /// waits for that up to `within`.
    pub(super) async fn settled(&self, client_id: &str, within: Duration) -> bool {
        self.recovered_and(client_id, &self.settled, within).await
    }

    async fn recovered_and(
        &self,
        client_id: &str,
        done: &watch::Sender<bool>,
        within: Duration,
    ) -> bool {
        if !self.recovered.contains(client_id) {
            return true;
        }
        let mut done = done.subscribe();
        let waiting = done.wait_for(|done| *done);
        matches!(tokio::time::timeout(within, waiting).await, Ok(Ok(_)))
    }

    /// Waits until every recovered session was checked against its owner record.
    pub(super) async fn all_settled(&self) {
        let _ = self.settled.subscribe().wait_for(|done| *done).await;
    }

    /// `client_id`'s recovered session is another node's: its copy here is being ended.
    pub(super) fn mark_stale(&self, client_id: &str) {
        self.stale_ids().insert(client_id.to_owned());
    }

    /// `client_id`'s stale copy is ended, and the mirror writes queued for it are passed.
    pub(super) fn unmark_stale(&self, client_id: &str) {
        self.stale_ids().remove(client_id);
    }

    /// Whether `client_id`'s copy here is stale and not ended yet.
    pub(super) fn is_stale(&self, client_id: &str) -> bool {
        self.stale_ids().contains(client_id)
    }

    fn stale_ids(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.stale.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where the messages the recovered sessions missed while the node was down start (the
    /// previous run's [`PreviousRun::missed_from`]), until the catch-up has ended: the
    /// heartbeat and the "alive at" stamp carry it as a start not replayed yet, so that the
    /// node's next run, or the node that takes its sessions over, reads from there. Why: in
    /// the 300-fault run of seed 5050 on 23bd507 (878.2 s) a node restarted, stamped, and was
    /// killed again 2 s later, before its catch-up had routed anything; its next run read from
    /// that short run's stamp, and one subscriber lost 556 messages acknowledged at the first
    /// death.
    pub(super) fn unfinished_from(&self) -> Option<SystemTime> {
        if *self.ended.borrow() {
            return None;
        }
        let previous = self.previous.get()?.as_ref().ok()?.as_ref()?;
        Some(previous.missed_from())
    }

    /// The recovered sessions were checked against their owner records.
    pub(super) fn settle(&self) {
        self.settled.send_replace(true);
    }

    /// The catch-up has ended: claims and releases waiting for it go on.
    pub(super) fn end(&self) {
        self.settled.send_replace(true);
        self.ended.send_replace(true);
    }

    async fn previous(&self) -> &Result<Option<PreviousRun>, StampError> {
        loop {
            if let Some(read) = self.previous.get() {
                return read;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Where the catch-up routes what it read: the shards' inbox, and the most copies a session
/// takes (`queues.max_queued_messages`).
pub(super) struct Routing<'a> {
    pub(super) poster: &'a Inbox,
    pub(super) max_queued: usize,
    /// The keys of the copies each session's store holds (`NodeContext::stored_keys`).
    pub(super) stored_keys: StoredKeys,
}

/// Routes to `sessions` (recovered from the store, still this node's) what they missed while
/// the node was down.
pub(super) async fn route_missed(
    restart: &Restart,
    link: &Link,
    routing: Routing<'_>,
    sessions: &[StoredSession],
) {
    let counters = &link.counters;
    let previous = match restart.previous().await {
        Ok(Some(previous)) => previous,
        Ok(None) => {
            return info!(
                "cluster: no alive stamp of an earlier run of this node; the sessions recovered from the store read nothing from the replay stream"
            );
        }
        Err(e) => {
            warn!(error = %e, "cluster: the sessions recovered from the store miss what was published while this node was down");
            return ClusterCounters::add(&counters.restart_replay_failures, 1);
        }
    };
    let missed_from = previous.missed_from();
    let from = missed_from.checked_sub(MARGIN).unwrap_or(missed_from);
    let Some(stream) = opened_stream(link).await else {
        warn!(
            "cluster: the replay stream is not open; a node replay stands in for the sessions recovered from the store"
        );
        ClusterCounters::add(&counters.restart_replay_failures, 1);
        return link.replays.request_from(from);
    };
    subscriptions_live(link, sessions).await;
    let subjects = sessions_subjects(&link.prefix, sessions);
    let read_began = SystemTime::now();
    match read_kept_retried(link, stream, &subjects, (from, READ_TIMEOUT, READ_RETRIES)).await {
        Ok(read) => {
            // What the earlier runs delivered, and what this one has since the sessions'
            // subscriptions went live (the read reaches past that moment).
            let since = from.checked_sub(JOURNAL_SLACK).unwrap_or(from);
            let (earlier, this_run) = journals_since(link, since).await.unzip();
            let journals = Journals {
                earlier,
                this_run,
                live: link.replays.live_keys.noted(),
                stored: routing.stored_keys,
            };
            let bounds = (routing.max_queued, &link.origin[..]);
            let (publishes, dropped) = copies_for(sessions, read.kept, bounds, &journals);
            if dropped > 0 {
                warn!(
                    dropped,
                    "cluster: copies read back for the sessions recovered from the store did not fit queues.max_queued_messages; the oldest were dropped"
                );
                ClusterCounters::add(&counters.recovered_dropped, dropped as u64);
            }
            info!(count = publishes.len(), sessions = sessions.len(), previous = %previous.origin, "cluster: what the sessions recovered from the store missed while this node was down is routed to them");
            ClusterCounters::add(&counters.restart_replayed, publishes.len() as u64);
            post_read_back(link, routing.poster, publishes);
            // A node replay reaching back before the read skips them (`arrivals.rs`): the read
            // gave them what the previous run had not, and the previous run's deliveries are
            // known to its journal and their stores, not to this run's duplicate check.
            for session in sessions {
                link.replays
                    .arrivals
                    .arrived(&session.client_id, read_began);
            }
            tokio::time::sleep(ROUTED_MARGIN).await;
        }
        Err(e) => {
            warn!(error = %e, "cluster: what the sessions recovered from the store missed was not read; a node replay stands in");
            ClusterCounters::add(&counters.restart_replay_failures, 1);
            link.replays.request_from(from);
        }
    }
}

/// The delivery journals the catch-up reads (docs/cluster.md, "Exactly once across a node's
/// death"); `None` where they are not open or could not be read (logged).
#[derive(Debug, Default)]
struct Journals {
    /// Every other node run's (this node's earlier runs and other nodes'), in the stream's
    /// order.
    earlier: Option<HashMap<MqttStr, Deliveries>>,
    this_run: Option<HashMap<MqttStr, Deliveries>>,
    /// The keys of the messages that reached this node live meanwhile (`live_keys.rs`).
    live: HashSet<u64>,
    /// The keys of the copies each session's store holds (queued, on disk included, and in
    /// flight).
    stored: StoredKeys,
}

impl Journals {
    /// What they say of `session`.
    fn of(&self, session: &StoredSession) -> SessionJournals<'_> {
        let client = &session.client_id;
        SessionJournals {
            earlier: self.earlier.as_ref().and_then(|all| all.get(client)),
            this_run: self.this_run.as_ref().and_then(|all| all.get(client)),
            stored: session.inflight.iter().map(|(id, _)| id.get()).collect(),
            stored_keys: self.stored.get(client),
            live: &self.live,
        }
    }
}

/// What the journals say of one recovered session, the packet ids its store resends, the keys
/// of the copies its store holds, and what reached this node live.
struct SessionJournals<'a> {
    earlier: Option<&'a Deliveries>,
    this_run: Option<&'a Deliveries>,
    stored: Vec<u16>,
    stored_keys: Option<&'a HashSet<u64>>,
    live: &'a HashSet<u64>,
}

impl SessionJournals<'_> {
    /// Whether the session has the message `key` already: its store holds a copy (queued or
    /// in flight), an earlier run delivered it (or the store resends it), this run sent it,
    /// or it reached this node live (and was routed to the session then).
    fn had(&self, key: u64) -> bool {
        (key != 0
            && (self.live.contains(&key) || self.stored_keys.is_some_and(|s| s.contains(&key))))
            || (self.earlier).is_some_and(|d| d.had_before_restart(key, &self.stored))
            || self.this_run.is_some_and(|d| d.has_sent(key))
    }
}

/// What every node run's delivery journal says since `since`, by client id: every other
/// run's (merged in the stream's order) and this run's. Every run, not only the previous one:
/// when this node restarted twice within seconds, the read reaches back into the run before
/// the previous one (the 300-fault run of seed 5050 on 045854f, 1,091.2 s: 21 QoS 2 messages
/// twice). `None` when the journal is not open within [`JOURNAL_OPEN_WAIT`] or is not read
/// after [`JOURNAL_RETRIES`] (logged: QoS 2 messages the recovered sessions had may then come
/// again).
async fn journals_since(
    link: &Link,
    since: SystemTime,
) -> Option<(HashMap<MqttStr, Deliveries>, HashMap<MqttStr, Deliveries>)> {
    let deadline = tokio::time::Instant::now() + JOURNAL_OPEN_WAIT;
    let journal = loop {
        if let Some(journal) = link.replays.journal.get() {
            break journal;
        }
        if tokio::time::Instant::now() >= deadline {
            warn!(
                "cluster: the delivery journal is not open; QoS 2 messages the recovered sessions had may come again"
            );
            return None;
        }
        tokio::time::sleep(POLL).await;
    };
    let read = || read_every_journal_record(link, journal, (since, READ_TIMEOUT));
    match retried(JOURNAL_RETRIES, read).await {
        Ok(records) => {
            let own = journal_subject(&link.prefix, &link.origin);
            let (this_run, earlier): (Vec<_>, Vec<_>) = records
                .into_iter()
                .partition(|(subject, _)| *subject == own);
            // In the stream's order, the runs interleaved: a packet id's last step is its
            // latest.
            let entries = |records: Vec<(String, Vec<_>)>| -> Vec<_> {
                records
                    .into_iter()
                    .flat_map(|(_, entries)| entries)
                    .collect()
            };
            let earlier = Deliveries::by_client(&entries(earlier));
            Some((earlier, Deliveries::by_client(&entries(this_run))))
        }
        Err(e) => {
            warn!(error = %e, "cluster: the delivery journals were not read; QoS 2 messages the recovered sessions had may come again");
            None
        }
    }
}

/// The replay stream, once open (`None` after [`SETUP_WAIT`]).
async fn opened_stream(link: &Link) -> Option<&stream::Stream> {
    let deadline = tokio::time::Instant::now() + SETUP_WAIT;
    loop {
        if let Some(stream) = link.replays.stream.get() {
            return Some(stream);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits (at most [`SETUP_WAIT`]) until every plain filter of `sessions` has its NATS
/// subscriptions, then until the server has them (a flush) and its routes ([`ROUTES_MARGIN`]):
/// what is published after that reaches this node live.
async fn subscriptions_live(link: &Link, sessions: &[StoredSession]) {
    let filters: Vec<&str> = (sessions.iter())
        .flat_map(|s| s.subscriptions.iter())
        .map(|s| s.filter.as_str())
        .collect();
    let deadline = tokio::time::Instant::now() + SETUP_WAIT;
    while !filters.iter().all(|f| link.replays.has_interest(f))
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(POLL).await;
    }
    let _ = tokio::time::timeout(SETUP_WAIT, link.client.flush()).await;
    tokio::time::sleep(ROUTES_MARGIN).await;
}

/// One publish per message and recovered session it matches, for that session alone, in the
/// stream's order: not this run's own messages (its local subscribers had them), nor expired
/// ones, nor those the `journals` say the session has; at most `max_queued` per session (its
/// newest); and how many older ones that bound dropped.
fn copies_for(
    sessions: &[StoredSession],
    kept: Vec<Kept>,
    (max_queued, own_run): (usize, &str),
    journals: &Journals,
) -> (Vec<ClusterPublish>, usize) {
    let now = SystemTime::now();
    let kept: Vec<Kept> = (kept.into_iter())
        .filter(|k| k.origin != own_run && expires_at(k).is_none_or(|at| at > now))
        .collect();
    let (mut publishes, mut dropped) = (Vec::new(), 0);
    for session in sessions {
        let plain = plain_subscriptions(session);
        let client_id = &session.client_id;
        let mut copies = copies_of_session(&plain, &kept, client_id, own_run);
        let journaled = journals.of(session);
        copies.retain(|copy| !journaled.had(copy.key));
        let excess = copies.len().saturating_sub(max_queued);
        copies.drain(..excess);
        dropped += excess;
        publishes.append(&mut copies);
    }
    (publishes, dropped)
}

/// The session's copies of `kept`: a no-local subscription takes none of this node's earlier
/// runs' messages (its client published through them).
fn copies_of_session(
    plain: &[Plain],
    kept: &[Kept],
    client_id: &MqttStr,
    own_run: &str,
) -> Vec<ClusterPublish> {
    let this_node = |origin: &str| same_node(origin, own_run);
    (kept.iter())
        .filter(|k| !matching(plain, k, this_node).is_empty())
        .map(|k| ClusterPublish {
            scope: Scope::Session(client_id.clone()),
            ..k.publish.clone()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use codec::{ProtocolVersion, QoS, RetainHandling, SubscriptionOptions};
    use session_store::SessionExpiry;
    use session_store::storage::StoredSubscription;

    use super::*;

    fn session(client_id: &str, filter: &str, no_local: bool) -> StoredSession {
        let client_id = MqttStr::try_from(client_id).unwrap();
        let mut session =
            StoredSession::new(client_id, ProtocolVersion::V5, SessionExpiry::OnClose, None);
        session.subscriptions = vec![StoredSubscription {
            filter: MqttStr::try_from(filter).unwrap(),
            options: SubscriptionOptions {
                qos: QoS::AtLeastOnce,
                no_local,
                retain_as_published: false,
                retain_handling: RetainHandling::SendAtSubscribe,
            },
            id: None,
        }];
        session
    }

    fn kept(payload: &'static str, origin: &str, expiry: Option<u32>) -> Kept {
        Kept {
            publish: ClusterPublish {
                topic: MqttStr::try_from("t/x").unwrap(),
                payload: Bytes::from_static(payload.as_bytes()),
                properties: Bytes::new(),
                qos: QoS::AtLeastOnce,
                retain: false,
                expiry,
                scope: Scope::Plain,
                key: 0,
            },
            origin: origin.to_owned(),
            kept_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1000),
        }
    }

    /// What each session gets, as `client id: payloads`.
    fn routed(publishes: &[ClusterPublish]) -> Vec<String> {
        (publishes.iter())
            .map(|p| match &p.scope {
                Scope::Session(id) => format!("{id}: {}", String::from_utf8_lossy(&p.payload)),
                other => panic!("not for one session: {other:?}"),
            })
            .collect()
    }

    fn read() -> Vec<Kept> {
        vec![
            kept("earlier run", "n1/old", None),
            kept("other node", "n2/1", None),
            kept("this run", "n1/new", None),
            kept("expired", "n2/1", Some(1)),
        ]
    }

    #[test]
    fn each_session_gets_what_it_matches_but_this_runs_own_and_expired_messages() {
        let sessions = [session("a", "t/#", true), session("b", "t/x", false)];
        let (publishes, dropped) =
            copies_for(&sessions, read(), (10, "n1/new"), &Journals::default());
        assert_eq!(dropped, 0);
        assert_eq!(
            routed(&publishes),
            ["a: other node", "b: earlier run", "b: other node"],
            "no-local takes none of this node's earlier runs' messages"
        );
    }

    #[test]
    fn a_session_gets_at_most_max_queued_its_newest() {
        let sessions = [session("b", "t/x", false)];
        let (publishes, dropped) =
            copies_for(&sessions, read(), (1, "n1/new"), &Journals::default());
        assert_eq!(routed(&publishes), ["b: other node"]);
        assert_eq!(dropped, 1, "the older copy, counted");
    }

    #[test]
    fn a_session_gets_none_of_the_messages_its_store_holds() {
        let keyed = |payload, key| Kept {
            publish: ClusterPublish {
                key,
                ..kept(payload, "n2/1", None).publish
            },
            ..kept(payload, "n2/1", None)
        };
        let journals = Journals {
            stored: HashMap::from([(MqttStr::try_from("b").unwrap(), HashSet::from([11, 12]))]),
            ..Journals::default()
        };
        let sessions = [session("a", "t/x", false), session("b", "t/x", false)];
        let read = vec![
            keyed("queued", 11),
            keyed("in flight", 12),
            keyed("missed", 13),
        ];
        let (publishes, _) = copies_for(&sessions, read, (10, "n1/new"), &journals);
        assert_eq!(
            routed(&publishes),
            ["a: queued", "a: in flight", "a: missed", "b: missed"]
        );
    }

    #[tokio::test]
    async fn a_session_not_recovered_is_never_held_and_a_recovered_one_until_the_end() {
        let restart = Restart::new(&[session("a", "t/#", false)]);
        assert!(restart.caught_up("z", Duration::ZERO).await);
        assert!(!restart.caught_up("a", Duration::from_millis(10)).await);
        assert!(!restart.settled("a", Duration::from_millis(10)).await);
        restart.settle();
        assert!(restart.settled("a", Duration::ZERO).await);
        assert!(!restart.caught_up("a", Duration::from_millis(10)).await);
        restart.end();
        assert!(restart.caught_up("a", Duration::ZERO).await);
    }
}
