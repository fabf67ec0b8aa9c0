//! [`Replays`]: what the replays of QoS 1/2 messages after a NATS connection loss share with
//! the rest of the cluster thread (the JetStream context, the subjects to replay, when the
//! connection was lost, the losses still to announce to the other nodes), the
//! [`ReplayRequest`] and the replay [`Window`]. `reliable.rs` runs the replays, `losses.rs`
//! announces this node's losses and hears the other nodes'.

use std::collections::{BTreeSet, HashMap};
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
    /// The delivery journal's stream, once open (`journal_writer.rs`).
    pub(super) journal: OnceLock<stream::Stream>,
    /// Keys of the messages delivered live while a restart's catch-up runs (`live_keys.rs`).
    pub(super) live_keys: super::live_keys::LiveKeys,
    /// The QoS 2 messages read back for one session alone (`read_back.rs`).
    pub(super) read_back: super::read_back::ReadBack,
    /// The sessions that came from other node runs, and up to when their reads cover them
    /// (`arrivals.rs`).
    pub(super) arrivals: super::arrivals::Arrivals,
    /// The `rel` subjects of each plain filter of this node (kept by the interest loop).
    subjects: Mutex<HashMap<String, Vec<String>>>,
    /// When the main NATS connection was lost, until it is back.
    disconnected_at: Mutex<Option<SystemTime>>,
    /// The replay still to run (requests merged).
    pending: Mutex<Option<ReplayRequest>>,
    /// Where the messages this node may have missed and not replayed yet start: the earliest
    /// start of the replays requested and not done (`unreplayed_from`).
    unreplayed: Mutex<Option<SystemTime>>,
    wake: Notify,
    /// The earliest loss of the main connection not yet announced to the other nodes.
    unannounced: Mutex<Option<SystemTime>>,
    announce: Notify,
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

    /// The main NATS connection is up: a replay from before it was lost, if it was, and the
    /// loss to announce to the other nodes (what this node published may have been lost on
    /// the routes of the server it lost).
    pub(super) fn connected(&self) {
        if let Some(at) = lock(&self.disconnected_at).take() {
            let from = at.checked_sub(REPLAY_MARGIN).unwrap_or(at);
            self.request_again(ReplayRequest {
                from,
                origins: Origins::All,
                follow_up: true,
            });
            let mut unannounced = lock(&self.unannounced);
            *unannounced = Some(unannounced.map_or(at, |earlier| earlier.min(at)));
            self.announce.notify_one();
        }
    }

    /// The NATS client dropped a message it had no room for: a replay from just before now.
    pub(super) fn slow_consumer(&self) {
        self.request(SystemTime::now(), Origins::All);
    }

    /// Another node run (`origin`) lost its NATS connection at `at`: a replay of its messages.
    pub(super) fn other_node_lost(&self, origin: String, at: SystemTime) {
        self.request(at, Origins::Only(BTreeSet::from([origin])));
    }

    fn request(&self, missed_from: SystemTime, origins: Origins) {
        let from = missed_from
            .checked_sub(REPLAY_MARGIN)
            .unwrap_or(missed_from);
        self.request_again(ReplayRequest {
            from,
            origins,
            follow_up: false,
        });
    }

    /// A replay of every node's messages from `from` exactly (no margin).
    pub(super) fn request_from(&self, from: SystemTime) {
        self.request_again(ReplayRequest {
            from,
            origins: Origins::All,
            follow_up: false,
        });
    }

    /// `request` to run (merged with a pending one).
    pub(super) fn request_again(&self, request: ReplayRequest) {
        let mut pending = lock(&self.pending);
        // Under the pending lock, as in `replayed`: a replay ending meanwhile cannot undo it.
        self.note_unreplayed(request.from);
        *pending = Some(match pending.take() {
            Some(earlier) => earlier.merged(request),
            None => request,
        });
        self.wake.notify_one();
    }

    /// A replay from `from` is due, to be requested a moment later: noted under the pending
    /// lock, as in [`Self::request_again`], so that a replay ending meanwhile cannot undo it.
    pub(super) fn note_due(&self, from: SystemTime) {
        let _pending = lock(&self.pending);
        self.note_unreplayed(from);
    }

    /// Messages from `from` on may be missed here until a replay covers them.
    fn note_unreplayed(&self, from: SystemTime) {
        let mut unreplayed = lock(&self.unreplayed);
        *unreplayed = Some(unreplayed.map_or(from, |earlier| earlier.min(from)));
    }

    /// A replay is done: what it covered is not missed any more; what is still due starts
    /// where the pending request does (none: nothing is missed).
    pub(super) fn replayed(&self) {
        let pending = lock(&self.pending);
        *lock(&self.unreplayed) = pending.as_ref().map(|request| request.from);
    }

    /// Where the messages this node may have missed and not replayed yet start (`None`: it
    /// has everything, as far as it knows). The heartbeat carries it (`totals.rs`): a node
    /// that takes this one's sessions over after its death reads from there.
    pub(super) fn unreplayed_from(&self) -> Option<SystemTime> {
        *lock(&self.unreplayed)
    }

    pub(super) async fn next_request(&self) -> ReplayRequest {
        loop {
            if let Some(request) = lock(&self.pending).take() {
                return request;
            }
            self.wake.notified().await;
        }
    }

    /// The earliest loss of the main connection not announced yet (waits for one).
    pub(super) async fn next_loss_to_announce(&self) -> SystemTime {
        loop {
            if let Some(at) = lock(&self.unannounced).take() {
                return at;
            }
            self.announce.notified().await;
        }
    }

    /// A loss whose announcement failed: announced again with the next one.
    pub(super) fn announce_again(&self, at: SystemTime) {
        let mut unannounced = lock(&self.unannounced);
        *unannounced = Some(unannounced.map_or(at, |later| later.min(at)));
        self.announce.notify_one();
    }

    /// A plain filter's NATS subjects were taken (`Some`) or dropped (`None`).
    pub(super) fn set_interest(&self, filter: &str, subjects: Option<Vec<String>>) {
        let mut table = lock(&self.subjects);
        match subjects {
            Some(subjects) => table.insert(filter.to_owned(), subjects),
            None => table.remove(filter),
        };
    }

    /// Whether the plain filter `filter` has its NATS subscriptions.
    pub(super) fn has_interest(&self, filter: &str) -> bool {
        lock(&self.subjects).contains_key(filter)
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

/// A replay to run: the stream read from `from`, the messages of `origins` handed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReplayRequest {
    pub(super) from: SystemTime,
    pub(super) origins: Origins,
    /// Read again a little later from where this one began (`reliable.rs`): after this node's
    /// own connection came back, its subscriptions take a moment to reach the other servers
    /// over their routes, and a message published meanwhile is neither delivered to it nor in
    /// a replay that read the stream before it was kept.
    pub(super) follow_up: bool,
}

impl ReplayRequest {
    /// One replay that covers both: the earlier start, every origin either names.
    fn merged(self, other: ReplayRequest) -> ReplayRequest {
        let origins = match (self.origins, other.origins) {
            (Origins::Only(mut mine), Origins::Only(theirs)) => {
                mine.extend(theirs);
                Origins::Only(mine)
            }
            _ => Origins::All,
        };
        ReplayRequest {
            from: self.from.min(other.from),
            origins,
            follow_up: self.follow_up || other.follow_up,
        }
    }
}

/// Whose messages a replay hands on (always another node's: never this node run's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Origins {
    /// This node may have missed any node's messages (its own connection was lost).
    All,
    /// These node runs lost their connections: their messages may have been lost on the way.
    Only(BTreeSet<String>),
}

impl Origins {
    pub(super) fn includes(&self, origin: &str) -> bool {
        match self {
            Origins::All => true,
            Origins::Only(origins) => origins.contains(origin),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn only(origins: &[&str]) -> Origins {
        Origins::Only(origins.iter().map(|o| (*o).to_owned()).collect())
    }

    #[tokio::test]
    async fn what_is_unreplayed_starts_at_the_earliest_request_not_done() {
        let replays = Replays::default();
        assert_eq!(replays.unreplayed_from(), None);
        replays.request_from(at(100));
        let running = replays.next_request().await;
        assert_eq!(replays.unreplayed_from(), Some(at(100)), "while it runs");
        replays.request_from(at(120));
        assert_eq!(replays.unreplayed_from(), Some(at(100)));
        replays.replayed();
        assert_eq!(replays.unreplayed_from(), Some(at(120)), "still due");
        assert_eq!(running.from, at(100));
        let _ = replays.next_request().await;
        replays.replayed();
        assert_eq!(replays.unreplayed_from(), None);
    }

    #[tokio::test]
    async fn requests_merge_into_the_earliest_start_and_every_origin_named() {
        let replays = Replays::default();
        replays.other_node_lost("a/1".into(), at(100));
        replays.other_node_lost("b/2".into(), at(90));
        let request = replays.next_request().await;
        assert_eq!(request.from, at(90) - REPLAY_MARGIN);
        assert_eq!(request.origins, only(&["a/1", "b/2"]));
        assert!(request.origins.includes("a/1") && !request.origins.includes("c/3"));
    }

    #[tokio::test]
    async fn a_loss_of_this_node_replays_every_origin_and_is_announced_once() {
        let replays = Replays::default();
        replays.other_node_lost("a/1".into(), at(50));
        replays.disconnected();
        replays.connected();
        let request = replays.next_request().await;
        assert_eq!(request.origins, Origins::All);
        assert_eq!(
            request.from,
            at(50) - REPLAY_MARGIN,
            "the earlier start kept"
        );
        assert!(request.follow_up, "a loss of its own is read again later");
        let announced = replays.next_loss_to_announce().await;
        assert!(announced <= SystemTime::now());
        assert!(lock(&replays.unannounced).is_none(), "announced once");
        replays.connected();
        assert!(
            lock(&replays.unannounced).is_none(),
            "no loss, nothing to announce"
        );
    }
}
