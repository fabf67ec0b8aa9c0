//! [`Replays`]: what the replays of QoS 1/2 messages after a NATS connection loss share with
//! the rest of the cluster thread (the JetStream context, the subjects to replay, when the
//! connection was lost), and the replay [`Window`]. `reliable.rs` runs the replays.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use async_nats::jetstream::{self, stream};
use tokio::sync::Notify;

use super::subject::subject_matches;

/// A replay starts this long before the moment messages may have been missed (delivery lag,
/// and the NATS servers' clocks, which stamp the stream, against this node's).
const REPLAY_MARGIN: Duration = Duration::from_secs(5);

/// What the replays need from the rest of the cluster thread.
#[derive(Default)]
pub(crate) struct Replays {
    /// The JetStream context, once the stream is open (QoS 1/2 are then JetStream publishes).
    pub(super) js: OnceLock<jetstream::Context>,
    /// The stream itself, once open (a dead node's sessions read what they missed from it).
    pub(super) stream: OnceLock<stream::Stream>,
    /// The `rel` subjects of each plain filter of this node (kept by the interest loop).
    subjects: Mutex<HashMap<String, Vec<String>>>,
    /// When the main NATS connection was lost, until it is back.
    disconnected_at: Mutex<Option<SystemTime>>,
    /// The earliest instant a pending replay starts from.
    pending: Mutex<Option<SystemTime>>,
    wake: Notify,
    /// Told when the main NATS connection is lost: JetStream acknowledgements awaited on it
    /// will not come, their publishes are made again (`acks.rs`).
    pub(super) lost: Notify,
}

impl Replays {
    /// The main NATS connection was lost.
    pub(super) fn disconnected(&self) {
        lock(&self.disconnected_at).get_or_insert_with(SystemTime::now);
        self.lost.notify_waiters();
    }

    /// The main NATS connection is up: a replay from before it was lost, if it was.
    pub(super) fn connected(&self) {
        if let Some(at) = lock(&self.disconnected_at).take() {
            self.request(at);
        }
    }

    /// The NATS client dropped a message it had no room for: a replay from just before now.
    pub(super) fn slow_consumer(&self) {
        self.request(SystemTime::now());
    }

    fn request(&self, missed_from: SystemTime) {
        let from = missed_from
            .checked_sub(REPLAY_MARGIN)
            .unwrap_or(missed_from);
        self.request_from(from);
    }

    /// A replay from `from` (merged with a pending one: the earlier start).
    pub(super) fn request_from(&self, from: SystemTime) {
        let mut pending = lock(&self.pending);
        *pending = Some(pending.map_or(from, |earlier| earlier.min(from)));
        self.wake.notify_one();
    }

    pub(super) async fn next_request(&self) -> SystemTime {
        loop {
            if let Some(from) = lock(&self.pending).take() {
                return from;
            }
            self.wake.notified().await;
        }
    }

    /// A plain filter's NATS subjects were taken (`Some`) or dropped (`None`).
    pub(super) fn set_interest(&self, filter: &str, subjects: Option<Vec<String>>) {
        let mut table = lock(&self.subjects);
        match subjects {
            Some(subjects) => table.insert(filter.to_owned(), subjects),
            None => table.remove(filter),
        };
    }

    pub(super) fn matches(&self, subject: &str) -> bool {
        lock(&self.subjects)
            .values()
            .flatten()
            .any(|pattern| subject_matches(pattern, subject))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the stream keeps.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    pub(super) max_age: Duration,
    pub(super) max_bytes: u64,
    pub(super) replicas: usize,
    /// The stream's `duplicate_window` (`reliable::duplicate_window`).
    pub(super) duplicates: Duration,
}
