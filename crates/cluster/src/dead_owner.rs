//! A claim whose owner is gone (no answer, heartbeat expired; docs/cluster.md, "When a node
//! dies"): the session comes back from the JetStream mirror (`mirror.rs`) with the messages it
//! missed from the replay stream appended (`missed.rs`); once the claim is answered, a
//! follow-up covers what was published while it moved here (`follow_up.rs`).

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use session_store::storage::{StoredMessage, StoredSession, encode_session_snapshot};
use tracing::{debug, info, warn};

use super::alive::last_stamp_of;
use super::counters::ClusterCounters;
use super::follow_up::FollowFrom;
use super::follow_up::JOURNAL_SLACK;
use super::journal_read::{self, Deliveries, leave_out_sent_elsewhere, read_journal};
use super::mirror::append_to_queue;
use super::missed::{READ_TIMEOUT, read_missed, read_start, session_subjects};
use super::overlap::leave_out_overlap;
use super::owners::{Buckets, Owners, heartbeat_key};
use super::retried::Retries;
use broker_api::cluster::ClaimRequest;

/// The recovery reads the other runs' journals once, within what is left of its deadline.
const ONE_TRY: Retries = Retries {
    tries: 1,
    apart: Duration::ZERO,
    what: "a recovery's read of the delivery journals",
};
/// The longest the read of a dead run's "alive at" stamp may take (within the claim's time).
const STAMP_WAIT: Duration = Duration::from_secs(1);

impl Owners {
    /// The session of `claim`'s client on the dead node run `owner`, rebuilt from the mirror
    /// with what it missed (read by `deadline`, at most [`READ_TIMEOUT`]); `None` when nothing
    /// is mirrored (counted as lost) or the client asked for a clean start.
    pub(super) async fn recover_dead(
        &self,
        buckets: &Buckets,
        (owner, deadline): (&str, Instant),
        claim: &ClaimRequest,
    ) -> Option<Bytes> {
        let client = claim.client_id.as_str();
        let Some(mirrored) = buckets.mirror.recover(client).await else {
            warn!(
                owner,
                client,
                "cluster: the session's node is gone and nothing of it is mirrored; the client starts a new session here"
            );
            ClusterCounters::add(&self.link.counters.sessions_lost, 1);
            return None;
        };
        warn!(
            owner,
            client,
            "cluster: the session's node is gone; its session resumes here from the JetStream mirror"
        );
        ClusterCounters::add(&self.link.counters.sessions_recovered, 1);
        if claim.clean_start {
            return None;
        }
        let last_seen = match self.last_beats.of(&heartbeat_key(owner)) {
            Some(beat) => Some(beat),
            // Never seen here (this node started after the death): the run's last stamp.
            None => last_stamp_of(&buckets.alive, owner, STAMP_WAIT).await,
        };
        let from = read_start(last_seen, &mirrored);
        // An offline session's read starts at its last mirrored copy: nothing is read twice.
        let connected = mirrored.offline_since.is_none();
        info!(
            client,
            connected,
            heartbeat_known = last_seen.is_some(),
            from_seconds_ago = seconds_before_now(from),
            mirrored_seconds_ago = seconds_before_now(mirrored.written_at),
            "cluster: a recovered session reads what it missed"
        );
        let mut session = mirrored.session;
        debug!(
            client,
            queued = session.queued.len(),
            in_flight = session.inflight.len(),
            "cluster: the mirrored session as read, before what it missed"
        );
        self.add_missed(&mut session, owner, (from, deadline)).await;
        Some(Bytes::from(encode_session_snapshot(&session)))
    }

    /// Appends to `session`'s queue what it missed since `from` (at most
    /// `queues.max_queued_messages` in all, the oldest dropped first), and prepares the
    /// follow-up. A read that fails leaves the queue as mirrored (counted, logged); the
    /// follow-up then starts at `from`.
    async fn add_missed(
        &self,
        session: &mut StoredSession,
        owner: &str,
        (from, deadline): (SystemTime, Instant),
    ) {
        let deliveries = self.dead_run_deliveries(session, owner, deadline).await;
        if let Some(deliveries) = &deliveries {
            drop_acknowledged(session, deliveries);
        }
        let Some(stream) = self.link.replays.stream.get() else {
            return; // `replay_window_ms = 0`: nothing is kept.
        };
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .min(READ_TIMEOUT);
        let counters = &self.link.counters;
        let reading = read_missed(&self.link, stream, session, owner, (from, timeout));
        let (read_to, already, read_qos2) = match reading.await {
            Ok(missed) => {
                let keys = missed.copies.iter().map(|(key, _)| *key);
                let already: HashSet<u64> = keys.filter(|key| *key != 0).collect();
                let read_qos2: Vec<u64> = (missed.copies.iter())
                    .filter(|(key, copy)| *key != 0 && copy.qos == codec::QoS::ExactlyOnce)
                    .map(|(key, _)| *key)
                    .collect();
                let since = from.checked_sub(JOURNAL_SLACK).unwrap_or(from);
                let placing = (deliveries.as_ref(), (since, deadline));
                let copies = self.trim_read(session, missed.copies, placing).await;
                let client = session.client_id.as_str();
                let count = copies.len();
                info!(
                    client,
                    count, "cluster: messages the session missed queued from the replay stream"
                );
                ClusterCounters::add(&counters.sessions_replayed, count as u64);
                append_to_queue(session, copies);
                let excess = session.queued.len().saturating_sub(self.max_queued);
                session.queued.drain(..excess);
                count_dropped(counters, session.client_id.as_str(), excess);
                (missed.read_to, already, read_qos2)
            }
            Err(e) => {
                let client = session.client_id.as_str();
                warn!(client, error = %e, "cluster: the messages a recovered session missed were not read; it resumes without them");
                ClusterCounters::add(&counters.sessions_replay_failures, 1);
                (from, HashSet::new(), Vec::new())
            }
        };
        let subjects = session_subjects(&self.link.prefix, session);
        let client_id = session.client_id.clone();
        self.follow_ups.prepare(
            client_id,
            subjects,
            FollowFrom {
                from: read_to,
                already,
                read_qos2,
            },
        );
    }
}

impl Owners {
    /// What the dead run `owner`'s delivery journal says of its QoS 2 deliveries to
    /// `session`; `None` when the journal is not open, names none, or was not read (logged:
    /// QoS 2 messages it delivered may then come again).
    async fn dead_run_deliveries(
        &self,
        session: &StoredSession,
        owner: &str,
        deadline: Instant,
    ) -> Option<Deliveries> {
        let journal = self.link.replays.journal.get()?;
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .min(READ_TIMEOUT);
        let client = session.client_id.as_str();
        match read_journal(&self.link, journal, owner, (None, timeout)).await {
            Ok(entries) => {
                let deliveries = Deliveries::of(&entries, client);
                if deliveries.is_empty() {
                    info!(
                        client,
                        entries = entries.len(),
                        "cluster: the dead node's journal names no QoS 2 delivery to the session"
                    );
                    return None;
                }
                Some(deliveries)
            }
            Err(e) => {
                warn!(client, error = %e, "cluster: the dead node's delivery journal was not read; QoS 2 messages it delivered to the session may come again");
                None
            }
        }
    }
}

impl Owners {
    /// Of `copies` read back for `session`, leaves out what other node runs sent it (their
    /// journals read from `since`, by `deadline`) and what its snapshot holds already (both
    /// logged), then places what the dead run's journal (`deliveries`) says; the copies to
    /// queue.
    async fn trim_read(
        &self,
        session: &mut StoredSession,
        mut copies: Vec<(u64, StoredMessage)>,
        (deliveries, (since, deadline)): (Option<&Deliveries>, (SystemTime, Instant)),
    ) -> Vec<StoredMessage> {
        let every_run = self.sent_by_every_run(session, since, deadline).await;
        let elsewhere = leave_out_sent_elsewhere(&mut copies, &every_run, deliveries);
        let why = "QoS 2 messages other node runs sent the session are not queued again";
        note_copies(session, elsewhere, why);
        let twice = leave_out_overlap(session, &mut copies);
        let why = "messages both mirrored with the session and read back are kept once";
        note_copies(session, twice, why);
        match deliveries {
            Some(deliveries) => place_journaled(session, copies, deliveries),
            None => copies.into_iter().map(|(_, copy)| copy).collect(),
        }
    }

    /// What every node run's delivery journal says it sent `session` at QoS 2 since `since`
    /// (empty when the journal is not open or was not read by `deadline`: logged).
    async fn sent_by_every_run(
        &self,
        session: &StoredSession,
        since: SystemTime,
        deadline: Instant,
    ) -> Deliveries {
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .min(READ_TIMEOUT);
        let client = session.client_id.as_str();
        let bounds = (ONE_TRY, timeout);
        match journal_read::sent_by_every_run(&self.link, client, since, bounds).await {
            Ok(deliveries) => deliveries,
            Err(e) => {
                warn!(client, error = %e, "cluster: the delivery journals were not read for a recovered session; QoS 2 messages another node delivered may come again");
                Deliveries::default()
            }
        }
    }
}

/// Logs `count` copies of a recovered session's read or mirror left out or placed for `why`,
/// if any.
fn note_copies(session: &StoredSession, count: usize, why: &str) {
    if count > 0 {
        info!(client = session.client_id.as_str(), count, "cluster: {why}");
    }
}

/// Drops from `session`'s mirrored queue what the dead run's journal says the client has
/// (`journal_read::drop_acknowledged`) and puts back in flight what it says is still out
/// (`journal_read::resume_still_out`), logged.
fn drop_acknowledged(session: &mut StoredSession, deliveries: &Deliveries) {
    let dropped = journal_read::drop_acknowledged(session, deliveries);
    let why =
        "mirrored QoS 2 messages the dead node's journal says the client has are not queued again";
    note_copies(session, dropped, why);
    let resumed = journal_read::resume_still_out(session, deliveries);
    let why = "mirrored QoS 2 messages the dead node's journal says are still out go back in flight under their packet ids";
    note_copies(session, resumed, why);
}

/// Of `copies` read back for `session` from the replay stream, those the dead run's journal
/// (`deliveries`) says the client has or may have go in flight or are left out
/// (`journal_read.rs`); the rest, to be queued, are returned.
fn place_journaled(
    session: &mut StoredSession,
    copies: Vec<(u64, StoredMessage)>,
    deliveries: &Deliveries,
) -> Vec<StoredMessage> {
    let read = copies.len();
    let queued = journal_read::apply(session, copies, deliveries);
    info!(
        client = session.client_id.as_str(),
        read,
        queued = queued.len(),
        in_flight = session.inflight.len(),
        "cluster: the dead node's QoS 2 deliveries to the session resume from its journal"
    );
    queued
}

/// How long before now `at` was, in seconds (negative: after now; for the log).
fn seconds_before_now(at: SystemTime) -> f64 {
    match SystemTime::now().duration_since(at) {
        Ok(age) => age.as_secs_f64(),
        Err(ahead) => -ahead.duration().as_secs_f64(),
    }
}

/// `dropped` copies read back for the recovered session `client` did not fit
/// `queues.max_queued_messages` (the oldest went): counted and logged, never silent.
pub(super) fn count_dropped(counters: &ClusterCounters, client: &str, dropped: usize) {
    if dropped == 0 {
        return;
    }
    warn!(
        client,
        dropped,
        "cluster: copies read back for a recovered session did not fit queues.max_queued_messages; the oldest were dropped"
    );
    ClusterCounters::add(&counters.recovered_dropped, dropped as u64);
}
