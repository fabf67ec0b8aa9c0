//! What a dead node's session missed (docs/cluster.md, "When a node dies"). When a claim
//! rebuilds a session from the JetStream mirror, the claiming node also reads the replay
//! stream `<base>_messages` (QoS 1/2 of every node) from the moment the dead node may have
//! stopped delivering to it ([`read_start`]) and queues every message that matches one of the
//! session's plain subscriptions into that session alone, after its mirrored queue, before
//! the CONNACK. What is published while the session moves here is covered by its follow-up
//! (`follow_up.rs`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use async_nats::jetstream::{self, consumer, stream};
use codec::{MqttStr, QoS, SubscriptionId, SubscriptionOptions};
use router::{SHARE_PREFIX, TopicFilter, TopicLimits};
use session_store::storage::{StoredMessage, StoredSession};

use super::headers;
use super::link_state::Link;
use super::mirror::Mirrored;
use super::retried::{Retries, retried};
use super::stream_read::{ReadError, read_pending};
use super::subject::{Root, filter_subjects, message_root, subject_to_topic};
use super::{ClusterPublish, Scope};

/// The read starts this long before the dead node's last heartbeat: a message stamped a moment
/// before it may not have reached the client yet (delivery lag; the NATS servers that stamp
/// the heartbeat and the stream should have synchronised clocks).
pub(super) const MARGIN: Duration = Duration::from_secs(2);
/// The longest a read may take (the one before the CONNACK also ends before the CONNECT's
/// time runs out: `dead_owner.rs`).
pub(super) const READ_TIMEOUT: Duration = Duration::from_secs(3);
/// With more distinct subjects than this, one consumer reads the whole `rel` root and the
/// filters are applied here (each subject is otherwise one consumer filtered by the server).
const MAX_CONSUMERS: usize = 8;
/// How long a node run's last heartbeat is remembered.
const BEATS_KEPT: Duration = Duration::from_secs(3600);

/// Where the read of a dead node's session starts. A session that was connected there:
/// [`MARGIN`] before the node's last heartbeat seen here (or before where its messages not
/// replayed yet started, if it died with a replay due, or its catch-up after a restart had not
/// ended), or else its run's last "alive at" stamp (`last_beat`: it stopped delivering after
/// it), or before the session's mirror record was written when neither is known (it was alive
/// then too; more duplicates). A session that was offline there: when the last of it was
/// mirrored (its queued copies cover what came before), or [`MARGIN`] before `last_beat` if
/// that is earlier: a run restarted with its store mirrors the sessions it recovered there
/// before its catch-up has queued what they missed while it was down, and its heartbeats
/// carry where that catch-up reads from. Why: in a 80-fault run of seed 4848 a node was killed,
/// restarted 2 s later, its catch-up's reads timed out while a NATS server was down, and it
/// was killed again; the session of a subscriber that had not come back to it was recovered
/// elsewhere as offline, read from its last mirrored copy, and lost the 2 s of the first
/// death (395 messages). The copies read that the mirror holds too are kept once
/// (`overlap.rs`).
pub(super) fn read_start(last_beat: Option<SystemTime>, mirrored: &Mirrored) -> SystemTime {
    let before = |at: SystemTime| at.checked_sub(MARGIN).unwrap_or(at);
    match (mirrored.offline_since, last_beat) {
        (Some(offline), Some(beat)) => offline.min(before(beat)),
        (Some(offline), None) => offline,
        (None, beat) => before(beat.unwrap_or(mirrored.written_at)),
    }
}

/// The last heartbeat seen of each node run (the NATS server's time of its record), or where
/// the messages it had not replayed yet start, if earlier (`totals::heartbeat_value`), kept by
/// the heartbeat loop each time it sums the totals.
#[derive(Debug, Default)]
pub(super) struct LastBeats(Mutex<HashMap<String, SystemTime>>);

impl LastBeats {
    /// Records the live heartbeats just read (key: `owners::heartbeat_key`), forgetting runs
    /// not seen for [`BEATS_KEPT`].
    pub(super) fn seen(&self, beats: Vec<(String, SystemTime)>) {
        let mut table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        table.extend(beats);
        let now = SystemTime::now();
        table.retain(|_, at| now.duration_since(*at).map_or(true, |age| age < BEATS_KEPT));
    }

    /// The last heartbeat seen of the node run with heartbeat key `key`.
    pub(super) fn of(&self, key: &str) -> Option<SystemTime> {
        let table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        table.get(key).copied()
    }
}

/// What the replay stream held for a session.
#[derive(Debug)]
pub(super) struct Missed {
    /// The copies for the session, oldest first, each with its message's key (0: none).
    pub(super) copies: Vec<(u64, StoredMessage)>,
    /// Where the read ended: the time of the stream's last message when it began.
    pub(super) read_to: SystemTime,
}

/// Why the read failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum MissedError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("JetStream did not describe the stream: {0}")]
    Info(String),
    #[error("took longer than {0:?}")]
    TimedOut(Duration),
}

/// Reads what `session` missed from `from` on (its plain subscriptions' subjects, every
/// node's messages); `dead_node` is the run it was on (its no-local subscriptions get none of
/// that run's messages: the client's own publishes went through it), within `timeout`.
pub(super) async fn read_missed(
    link: &Link,
    stream: &stream::Stream,
    session: &StoredSession,
    dead_node: &str,
    (from, timeout): (SystemTime, Duration),
) -> Result<Missed, MissedError> {
    let subscriptions = plain_subscriptions(session);
    let subjects = subjects_of(&link.prefix, &subscriptions);
    let read = read_kept(link, stream, &subjects, (from, timeout)).await?;
    let now = SystemTime::now();
    let copies = read
        .kept
        .iter()
        .filter_map(|kept| {
            let copy = copy_for(&subscriptions, kept, dead_node, now)?;
            Some((kept.publish.key, copy))
        })
        .collect();
    Ok(Missed {
        copies,
        read_to: read.up_to,
    })
}

/// The `rel` subjects of `session`'s plain subscriptions (see [`subjects_of`]).
pub(super) fn session_subjects(prefix: &str, session: &StoredSession) -> Vec<String> {
    subjects_of(prefix, &plain_subscriptions(session))
}

/// The `rel` subjects of the plain subscriptions of all `sessions` (see [`subjects_of`]).
pub(super) fn sessions_subjects(prefix: &str, sessions: &[StoredSession]) -> Vec<String> {
    let all: Vec<Plain> = sessions.iter().flat_map(plain_subscriptions).collect();
    subjects_of(prefix, &all)
}

/// What a read of the stream gave.
#[derive(Debug)]
pub(super) struct Read {
    /// The messages, each once, in the stream's order.
    pub(super) kept: Vec<Kept>,
    /// The time of the stream's last message when the read began (where it ended).
    pub(super) up_to: SystemTime,
}

/// Every message kept on `subjects` from `from` up to the stream's last when the read began,
/// within `timeout`.
pub(super) async fn read_kept(
    link: &Link,
    stream: &stream::Stream,
    subjects: &[String],
    (from, timeout): (SystemTime, Duration),
) -> Result<Read, MissedError> {
    let reading = read_kept_unbounded(link, stream, subjects, from);
    tokio::time::timeout(timeout, reading)
        .await
        .map_err(|_| MissedError::TimedOut(timeout))?
}

/// [`read_kept`], each try within `timeout`, tried again as `retries` says.
pub(super) async fn read_kept_retried(
    link: &Link,
    stream: &stream::Stream,
    subjects: &[String],
    (from, timeout, retries): (SystemTime, Duration, Retries),
) -> Result<Read, MissedError> {
    retried(retries, || {
        read_kept(link, stream, subjects, (from, timeout))
    })
    .await
}

async fn read_kept_unbounded(
    link: &Link,
    stream: &stream::Stream,
    subjects: &[String],
    from: SystemTime,
) -> Result<Read, MissedError> {
    let state = stream
        .get_info()
        .await
        .map_err(|e| MissedError::Info(e.to_string()))?
        .state;
    let last = SystemTime::from(state.last_timestamp);
    // Nothing kept from `from` on: the read ends at `from`, not at the last message before it,
    // where a follow-up starting at the end read that message again (a test saw it: a
    // recovered session got the last message of a backlog acknowledged long before).
    let up_to = last.max(from);
    if subjects.is_empty() || state.messages == 0 || last < from {
        let kept = Vec::new();
        return Ok(Read { kept, up_to });
    }
    let mut read = Vec::new();
    read_subjects(link, stream, subjects, from, &mut read).await?;
    let kept = in_stream_order(read)
        .filter_map(|message| kept(&link.prefix, message))
        .collect();
    Ok(Read { kept, up_to })
}

/// Reads each subject from `from` (one ordered consumer each) into `out`.
async fn read_subjects(
    link: &Link,
    stream: &stream::Stream,
    subjects: &[String],
    from: SystemTime,
    out: &mut Vec<jetstream::Message>,
) -> Result<(), ReadError> {
    for subject in subjects {
        let config = consumer::push::OrderedConfig {
            deliver_subject: format!("_INBOX.ringmq.missed.{}", link.client.new_inbox()),
            filter_subject: subject.clone(),
            deliver_policy: consumer::DeliverPolicy::ByStartTime {
                start_time: time::OffsetDateTime::from(from),
            },
            ..Default::default()
        };
        read_pending(stream, config, out).await?;
    }
    Ok(())
}

/// The messages read, each once (two subjects may both match one), in the stream's order.
fn in_stream_order(read: Vec<jetstream::Message>) -> impl Iterator<Item = jetstream::Message> {
    let mut ordered = BTreeMap::new();
    for message in read {
        if let Ok(info) = message.info() {
            let sequence = info.stream_sequence;
            ordered.entry(sequence).or_insert(message);
        }
    }
    ordered.into_values()
}

/// A plain subscription of the session, its filter parsed.
#[derive(Debug)]
pub(super) struct Plain {
    filter: TopicFilter,
    options: SubscriptionOptions,
    id: Option<SubscriptionId>,
}

/// The session's subscriptions that can have QoS 1/2 copies queued: not shared (NATS gave
/// their messages to the members still there), not at most QoS 0.
pub(super) fn plain_subscriptions(session: &StoredSession) -> Vec<Plain> {
    let limits = TopicLimits::default();
    session
        .subscriptions
        .iter()
        .filter(|s| {
            !s.filter.as_str().starts_with(SHARE_PREFIX) && s.options.qos != QoS::AtMostOnce
        })
        .filter_map(|s| {
            let filter = TopicFilter::new(s.filter.as_str(), &limits).ok()?;
            Some(Plain {
                filter,
                options: s.options,
                id: s.id,
            })
        })
        .collect()
}

/// The `rel` subjects to read for `subscriptions`: each filter's, or the whole root when there
/// are more than [`MAX_CONSUMERS`].
fn subjects_of(prefix: &str, subscriptions: &[Plain]) -> Vec<String> {
    let mut subjects: Vec<String> = subscriptions
        .iter()
        .flat_map(|s| filter_subjects(prefix, Root::Reliable, s.filter.as_str()))
        .collect();
    subjects.sort();
    subjects.dedup();
    if subjects.len() > MAX_CONSUMERS {
        return vec![format!("{}.>", message_root(prefix, Root::Reliable))];
    }
    subjects
}

/// One message of the replay stream as a session's subscriptions see it.
#[derive(Debug)]
pub(super) struct Kept {
    pub(super) publish: ClusterPublish,
    /// The node run that published it.
    pub(super) origin: String,
    /// When the stream kept it (its expiry counts from there).
    pub(super) kept_at: SystemTime,
}

/// A stream message decoded; `None` when it is not a RingMQ message.
fn kept(prefix: &str, message: jetstream::Message) -> Option<Kept> {
    let kept_at = SystemTime::from(message.info().ok()?.published);
    let message = message.message;
    let headers = message.headers.as_ref()?;
    let origin = headers::origin(headers).ok()?.node;
    let topic = MqttStr::try_from(subject_to_topic(prefix, message.subject.as_str()).ok()?).ok()?;
    let publish = headers::decode(topic, message.payload, headers, Scope::Plain).ok()?;
    Some(Kept {
        publish,
        origin,
        kept_at,
    })
}

/// The subscriptions of `subscriptions` that `kept` is for: their filters match its topic,
/// and a no-local one takes no message whose origin `clients_node` says is the node its
/// client published through (the publishing client's id does not travel with a message).
pub(super) fn matching<'a>(
    subscriptions: &'a [Plain],
    kept: &Kept,
    clients_node: impl Fn(&str) -> bool,
) -> Vec<&'a Plain> {
    let topic = kept.publish.topic.as_str();
    subscriptions
        .iter()
        .filter(|s| s.filter.matches_text(topic))
        .filter(|s| !(s.options.no_local && clients_node(&kept.origin)))
        .collect()
}

/// When `kept` expires (its Message Expiry Interval counts from when the stream kept it).
pub(super) fn expires_at(kept: &Kept) -> Option<SystemTime> {
    (kept.publish.expiry).map(|secs| kept.kept_at + Duration::from_secs(u64::from(secs)))
}

/// The copy of `kept` the session gets: one for all its matching subscriptions (as the router
/// gives one), at the lower of the message's QoS and the highest of theirs, with their
/// identifiers; `None` when none matches, the result would be QoS 0, or it has expired.
fn copy_for(
    subscriptions: &[Plain],
    kept: &Kept,
    dead_node: &str,
    now: SystemTime,
) -> Option<StoredMessage> {
    let publish = &kept.publish;
    let matching = matching(subscriptions, kept, |origin| origin == dead_node);
    let granted = matching.iter().map(|s| s.options.qos).max()?;
    let qos = granted.min(publish.qos);
    let expires_at = expires_at(kept);
    if qos == QoS::AtMostOnce || expires_at.is_some_and(|at| at <= now) {
        return None;
    }
    Some(StoredMessage {
        topic: publish.topic.as_shared_bytes().clone(),
        payload: publish.payload.clone(),
        qos,
        retain: publish.retain && matching.iter().any(|s| s.options.retain_as_published),
        properties: publish.properties.clone(),
        expires_at,
        sub_ids: matching.iter().filter_map(|s| s.id).collect(),
        // A queued copy, not a retained message: no acceptance time to keep.
        accepted_at: None,
        key: publish.key,
    })
}

#[cfg(test)]
#[path = "missed_tests.rs"]
mod tests;
