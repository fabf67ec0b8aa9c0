//! Reading a dead node run's delivery journal (`journal.rs`; docs/cluster.md, "Exactly once
//! across a node's death") and applying it to a session rebuilt from the mirror: of the
//! messages read back for it from the replay stream, those whose QoS 2 PUBLISH the dead node
//! had sent go back in flight under the same packet ids (resent with DUP: a client that has one
//! does not deliver it again), those whose PUBREC it had are not delivered again, and every
//! packet id still in use there (not completed) gets its PUBREL (the client's hold on the id
//! ends, and a new message is never sent under an id the client still treats as in flight).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use async_nats::jetstream::{consumer, stream};
use broker_api::cluster::{JournalEntry, JournalStep};
use codec::{MqttStr, PacketId};
use session_store::InflightState;
use session_store::storage::{StoredMessage, StoredSession};
use tracing::warn;

use super::journal_writer::{every_journal_subject, journal_subject};
use super::link_state::Link;
use super::missed::MissedError;
use super::retried::{Retries, retried};
use super::stream_read::read_pending;

/// Every step node run `run` journaled (within the stream's window; from `since` on, by the
/// NATS servers' clock, when given), in order, within `timeout`.
pub(super) async fn read_journal(
    link: &Link,
    stream: &stream::Stream,
    run: &str,
    (since, timeout): (Option<SystemTime>, Duration),
) -> Result<Vec<JournalEntry>, MissedError> {
    let subject = journal_subject(&link.prefix, run);
    read_journal_subject(link, stream, subject, (since, timeout)).await
}

/// [`read_journal`] of every node run (each run's steps in order, the runs interleaved).
pub(super) async fn read_every_journal(
    link: &Link,
    stream: &stream::Stream,
    (since, timeout): (SystemTime, Duration),
) -> Result<Vec<JournalEntry>, MissedError> {
    let subject = every_journal_subject(&link.prefix);
    read_journal_subject(link, stream, subject, (Some(since), timeout)).await
}

/// What every node run's delivery journal says it sent `client_id` at QoS 2 since `since`
/// (nothing when the journal is not open), read with `retries`, each try within `timeout`.
pub(super) async fn sent_by_every_run(
    link: &Link,
    client_id: &str,
    since: SystemTime,
    (retries, timeout): (Retries, Duration),
) -> Result<Deliveries, MissedError> {
    let Some(journal) = link.replays.journal.get() else {
        return Ok(Deliveries::default());
    };
    let read = || read_every_journal(link, journal, (since, timeout));
    let entries = retried(retries, read).await?;
    Ok(Deliveries::of(&entries, client_id))
}

/// [`read_every_journal`], each record with the subject of its run's journal
/// (`journal_writer::journal_subject`), in the stream's order.
pub(super) async fn read_every_journal_record(
    link: &Link,
    stream: &stream::Stream,
    (since, timeout): (SystemTime, Duration),
) -> Result<Vec<(String, Vec<JournalEntry>)>, MissedError> {
    let subject = every_journal_subject(&link.prefix);
    read_records(link, stream, subject, (Some(since), timeout)).await
}

async fn read_journal_subject(
    link: &Link,
    stream: &stream::Stream,
    filter_subject: String,
    bounds: (Option<SystemTime>, Duration),
) -> Result<Vec<JournalEntry>, MissedError> {
    let records = read_records(link, stream, filter_subject, bounds).await?;
    Ok(records
        .into_iter()
        .flat_map(|(_, entries)| entries)
        .collect())
}

/// Each journal record on `filter_subject` in the stream's order, with its subject.
async fn read_records(
    link: &Link,
    stream: &stream::Stream,
    filter_subject: String,
    (since, timeout): (Option<SystemTime>, Duration),
) -> Result<Vec<(String, Vec<JournalEntry>)>, MissedError> {
    let deliver_policy = match since {
        Some(from) => consumer::DeliverPolicy::ByStartTime {
            start_time: time::OffsetDateTime::from(from),
        },
        None => consumer::DeliverPolicy::All,
    };
    let config = consumer::push::OrderedConfig {
        deliver_subject: format!("_INBOX.ringmq.journal.{}", link.client.new_inbox()),
        filter_subject: filter_subject.clone(),
        deliver_policy,
        ..Default::default()
    };
    let mut read = Vec::new();
    let reading = read_pending(stream, config, &mut read);
    tokio::time::timeout(timeout, reading)
        .await
        .map_err(|_| MissedError::TimedOut(timeout))??;
    let mut records = Vec::new();
    for message in read {
        let subject = message.message.subject.to_string();
        match super::journal::decode(message.message.payload) {
            Ok(steps) => records.push((subject, steps)),
            Err(e) => {
                warn!(subject, error = %e, "cluster: a delivery journal record could not be read; skipped")
            }
        }
    }
    Ok(records)
}

/// What a run's journal says of one session's QoS 2 deliveries.
#[derive(Debug, Default)]
pub(super) struct Deliveries {
    /// Each packet id's last step, with the place of that step in the journal.
    last: HashMap<u16, (usize, JournalStep)>,
    /// Each key sent, with the packet id it was last sent under.
    sent: HashMap<u64, u16>,
    /// Steps added (the next one's place).
    steps: usize,
}

impl Deliveries {
    /// The steps of `entries` for `client_id`.
    pub(super) fn of(entries: &[JournalEntry], client_id: &str) -> Self {
        let mut deliveries = Self::default();
        let own = entries.iter().filter(|e| e.client_id.as_str() == client_id);
        own.for_each(|entry| deliveries.add(entry));
        deliveries
    }

    /// The steps of `entries` for each client id they name (one pass).
    pub(super) fn by_client(entries: &[JournalEntry]) -> HashMap<MqttStr, Self> {
        let mut all: HashMap<MqttStr, Self> = HashMap::new();
        for entry in entries {
            all.entry(entry.client_id.clone()).or_default().add(entry);
        }
        all
    }

    /// One more step, after those added before.
    fn add(&mut self, entry: &JournalEntry) {
        self.last.insert(entry.packet_id, (self.steps, entry.step));
        self.steps += 1;
        if let JournalStep::Sent { key } = entry.step
            && key != 0
        {
            self.sent.insert(key, entry.packet_id);
        }
    }

    /// The keys of the messages the run sent the session.
    pub(super) fn sent_keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.sent.keys().copied()
    }

    /// Whether the run delivered nothing to the session at QoS 2.
    pub(super) fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Whether the client has the message `key` by the run's journal: its PUBREC came (the
    /// last step of its packet id is not its *sent*).
    pub(super) fn acknowledged(&self, key: u64) -> bool {
        self.had_before_restart(key, &[])
    }

    /// Whether a session this node recovered from its store (with packet ids `stored` in
    /// flight) has the message `key` already, by the previous run's journal: its PUBREC came
    /// (the last step of its packet id is not its *sent*), or its PUBLISH went out under an id
    /// the store has in flight and resends. A message whose PUBLISH may have left under an id
    /// the store lacks (the store's write had not landed) is not: it comes again rather than
    /// never.
    pub(super) fn had_before_restart(&self, key: u64, stored: &[u16]) -> bool {
        match self.still_out(key) {
            Some((_, packet_id)) => stored.contains(&packet_id),
            None => self.has_sent(key),
        }
    }

    /// The packet id the PUBLISH of the message `key` is still out under by the journal (its
    /// last step *sent*, no PUBREC seen), with the place of that step.
    fn still_out(&self, key: u64) -> Option<(usize, u16)> {
        let &packet_id = (key != 0).then(|| self.sent.get(&key)).flatten()?;
        match self.last.get(&packet_id) {
            Some(&(place, JournalStep::Sent { key: last })) if last == key => {
                Some((place, packet_id))
            }
            _ => None,
        }
    }

    /// Whether the run sent the message `key` to the session (0: no key, never).
    pub(super) fn has_sent(&self, key: u64) -> bool {
        key != 0 && self.sent.contains_key(&key)
    }
}

/// Puts `copies` (read back for `session`, with their keys) where `deliveries` says: in
/// flight under the packet id a PUBLISH of theirs is still out with, left out when the client
/// had them, queued otherwise (also one whose packet id the session's own inflight entries
/// hold); every other packet id still in use gets its PUBREL.
pub(super) fn apply(
    session: &mut StoredSession,
    copies: Vec<(u64, StoredMessage)>,
    deliveries: &Deliveries,
) -> Vec<StoredMessage> {
    let mut in_flight: Vec<(usize, u16, Option<StoredMessage>)> = Vec::new();
    let mut queued = Vec::new();
    for (key, copy) in copies {
        if copy.qos != codec::QoS::ExactlyOnce || !deliveries.has_sent(key) {
            queued.push(copy);
            continue;
        }
        // Sent and not still out: its PUBREC came (the id may even carry a later message
        // since), delivered.
        if let Some((place, packet_id)) = deliveries.still_out(key) {
            in_flight.push((place, packet_id, Some(copy)));
        }
    }
    let with_message: Vec<u16> = in_flight.iter().map(|(_, id, _)| *id).collect();
    let taken: Vec<u16> = session.inflight.iter().map(|(id, _)| id.get()).collect();
    for (&packet_id, &(place, step)) in &deliveries.last {
        let done = step == JournalStep::Completed;
        if !done && !with_message.contains(&packet_id) {
            in_flight.push((place, packet_id, None));
        }
    }
    in_flight.sort_by_key(|(place, _, _)| *place);
    for (_, packet_id, copy) in in_flight {
        let Some(id) = PacketId::new(packet_id).filter(|_| !taken.contains(&packet_id)) else {
            // The session's own entry keeps the id; the copy waits in the queue instead.
            queued.extend(copy);
            continue;
        };
        let state = match copy {
            Some(copy) => InflightState::AwaitingPubRec(copy),
            None => InflightState::AwaitingPubComp,
        };
        session.inflight.push((id, state));
    }
    queued
}

/// Puts back in flight each QoS 2 message of `session`'s mirrored queue whose PUBLISH the
/// dead run's journal (`deliveries`) says is still out (sent, no PUBREC seen), under that
/// packet id and in the journal's order: resent with DUP, a client that has it does not
/// deliver it again (MQTT-4.3.3), where queued it would go out under a new id, a second
/// delivery. A connected session's mirror holds the messages it had queued at its CONNECT
/// until they are acknowledged (its backlog), and those the node sent meanwhile are named in
/// the journal only. An id the session's own inflight entries hold leaves the message queued.
/// How many were put back.
pub(super) fn resume_still_out(session: &mut StoredSession, deliveries: &Deliveries) -> usize {
    let mut taken: Vec<u16> = session.inflight.iter().map(|(id, _)| id.get()).collect();
    let mut out = Vec::new();
    let mut queued = Vec::with_capacity(session.queued.len());
    for (seq, message) in std::mem::take(&mut session.queued) {
        let is_qos2 = message.qos == codec::QoS::ExactlyOnce;
        let still_out = is_qos2.then(|| deliveries.still_out(message.key)).flatten();
        match still_out.filter(|(_, id)| !taken.contains(id)) {
            Some((place, id)) => {
                taken.push(id);
                out.push((place, id, message));
            }
            None => queued.push((seq, message)),
        }
    }
    session.queued = queued;
    out.sort_by_key(|(place, _, _)| *place);
    let count = out.len();
    for (_, id, message) in out {
        if let Some(id) = PacketId::new(id) {
            session
                .inflight
                .push((id, InflightState::AwaitingPubRec(message)));
        }
    }
    count
}

/// Drops from `session`'s queue and in-flight entries (as mirrored) the QoS 2 messages whose
/// PUBREC reached the run of `deliveries`: the client has them; how many (a packet id so
/// freed and not completed gets its PUBREL from [`apply`]). Why: a mirrored queue can be behind
/// what its node delivered (a session that node recovered from another node's mirror and
/// delivered to its client, whose removal of the other node's copies did not land), and what
/// the queue held came again: likely so in the 300-fault run of seed 5050 on 6e66b59
/// (1,395.0 s), 3,010 QoS 2 messages to one subscriber recovered as offline (docs/cluster.md);
/// and a connected session's snapshot keeps the backlog it came back to, in flight and queued,
/// until all of it is acknowledged (`shard/mirror.rs`).
pub(super) fn drop_acknowledged(session: &mut StoredSession, deliveries: &Deliveries) -> usize {
    let has = |message: &StoredMessage| {
        message.qos == codec::QoS::ExactlyOnce && deliveries.acknowledged(message.key)
    };
    let before = session.queued.len() + session.inflight.len();
    session.queued.retain(|(_, message)| !has(message));
    session
        .inflight
        .retain(|(_, state)| !matches!(state, InflightState::AwaitingPubRec(m) if has(m)));
    before - session.queued.len() - session.inflight.len()
}

/// Leaves out of `copies` (read back for a session recovered from a dead run, with their
/// keys) the QoS 2 messages another node run sent the session (`every_run`, the journals of
/// every run from shortly before the read's start) and the dead run did not (`dead_run`: its
/// own, which [`apply`] places); how many. Why: the read can start before the session came to
/// the dead run (its heartbeat carried an unfinished follow-up's start), and what the run it
/// was on before had delivered came again: the 300-fault run of seed 5050 on 045854f
/// (1,372.9 s) gave a subscriber 597 QoS 2 messages twice so, read 23 s back.
pub(super) fn leave_out_sent_elsewhere(
    copies: &mut Vec<(u64, StoredMessage)>,
    every_run: &Deliveries,
    dead_run: Option<&Deliveries>,
) -> usize {
    let before = copies.len();
    copies.retain(|(key, copy)| {
        let elsewhere = every_run.has_sent(*key) && !dead_run.is_some_and(|d| d.has_sent(*key));
        copy.qos != codec::QoS::ExactlyOnce || !elsewhere
    });
    before - copies.len()
}

#[cfg(test)]
#[path = "journal_read_tests.rs"]
mod tests;
