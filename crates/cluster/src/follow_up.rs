//! The follow-up of a session recovered from a dead node (docs/cluster.md, "When a node
//! dies"), also run for a session a live node released here (`owners.rs`, from a moment
//! before the release request: "Sessions across nodes"). The read before the CONNACK (`missed.rs`) ends where the stream was when it began,
//! and the session reaches this node's shards a moment after the claim is answered: what this
//! node received meanwhile for its other subscribers was routed to them only, and its duplicate
//! check would drop it from a node replay. So, once the session is in every shard's table
//! ([`FOLLOW_UP_DELAY`] after the answer), what the stream kept on its subjects from the end of
//! that read until [`INSTALL_MARGIN`] after the answer is routed to that session alone; a node
//! replay from there covers what this node did not receive before the session's NATS
//! subscriptions were in place. What the session received live in that margin comes twice at
//! QoS 1; at QoS 2 not what the delivery journals of every node run say they sent it (read
//! from shortly before the follow-up's start).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use codec::MqttStr;
use tracing::warn;

use super::counters::ClusterCounters;
use super::inbound::post_read_back;
use super::journal_read::{Deliveries, sent_by_every_run};
use super::link_state::Link;
use super::missed::{READ_TIMEOUT, read_kept_retried};
use super::retried::Retries;
use super::{ClusterPublish, Scope};
use crate::Inbox;

/// How long after the answer the follow-up reads: the rebuilt session's subscriptions are in
/// every shard's table by then and have taken their NATS subscriptions (NATS spreads them over
/// its routes in milliseconds).
const FOLLOW_UP_DELAY: Duration = Duration::from_secs(1);
/// The follow-up covers what was kept until this long after the answer: the shard rebuilds
/// the session within it (and the node's clock and the NATS servers' differ by less).
const INSTALL_MARGIN: Duration = Duration::from_millis(500);
/// Tries of the follow-up read, one a second, before a node replay stands in: right after a
/// NATS server restarted JetStream may not answer for some seconds, and a node replay cannot
/// stand in well (its duplicate check drops what this node already routed to its other
/// sessions, and it never replays this node's own messages).
const READ_TRIES: u32 = 15;
const READ_RETRY: Duration = Duration::from_secs(1);
/// How the follow-up read is tried again.
const READ_RETRIES: Retries = Retries {
    tries: READ_TRIES,
    apart: READ_RETRY,
    what: "a recovered session's follow-up read",
};
/// Tries of each delivery journal's read (`sent_to`), [`READ_RETRY`] apart.
const JOURNAL_TRIES: u32 = 5;
/// The delivery journals are read from this long before the follow-up's start: a message kept
/// from then on was sent no earlier (less the difference between the clocks of the nodes and
/// the NATS servers: 2 s), and a node replay here reaches 5 s before a loss
/// (`replays::REPLAY_MARGIN`): what the session was sent since is noted as its own
/// (`read_back.rs`).
pub(super) const JOURNAL_SLACK: Duration = Duration::from_secs(7);

/// What a follow-up reads.
#[derive(Debug)]
struct FollowUp {
    client_id: MqttStr,
    /// The `rel` subjects of the session's plain subscriptions.
    subjects: Vec<String>,
    /// Where the read before the CONNACK ended (its start, if it failed).
    from: SystemTime,
    /// The keys of the messages that read gave the session: the follow-up, which starts at
    /// the time of its last message, does not give them again.
    already: HashSet<u64>,
    /// The QoS 2 messages among those: noted once the claim is won (`read_back.rs`), so that
    /// they reaching the node again for its plain subscriptions skip the session.
    read_qos2: Vec<u64>,
}

/// Where a follow-up starts and what it leaves out (see [`FollowUp`]).
#[derive(Debug)]
pub(super) struct FollowFrom {
    pub(super) from: SystemTime,
    pub(super) already: HashSet<u64>,
    pub(super) read_qos2: Vec<u64>,
}

/// The follow-ups of claims not answered yet, by client id, and where those answered and not
/// done yet start (by client id, with a number telling a newer one of the same client apart).
#[derive(Debug, Default)]
pub(super) struct FollowUps {
    waiting: Mutex<HashMap<String, FollowUp>>,
    running: Arc<Mutex<HashMap<String, (u64, SystemTime)>>>,
    next: std::sync::atomic::AtomicU64,
}

impl FollowUps {
    /// A claim of `client_id` recovered its session: once the claim is answered, a follow-up
    /// reads `subjects` from `start.from`, leaving out the messages `start.already` read for
    /// it and those any node run's delivery journal says it was sent at QoS 2.
    pub(super) fn prepare(&self, client_id: MqttStr, subjects: Vec<String>, start: FollowFrom) {
        let FollowFrom {
            from,
            already,
            read_qos2,
        } = start;
        if subjects.is_empty() {
            return; // Nothing it subscribes to is kept.
        }
        let key = client_id.as_str().to_owned();
        let follow_up = FollowUp {
            client_id,
            subjects,
            from,
            already,
            read_qos2,
        };
        lock(&self.waiting).insert(key, follow_up);
    }

    /// The claim of `client_id` was answered (`won`: the session is this node's now): its
    /// follow-up, if it has one, runs.
    pub(super) fn answered(&self, client_id: &str, won: bool, link: &Arc<Link>, poster: &Inbox) {
        let Some(follow_up) = lock(&self.waiting).remove(client_id) else {
            return;
        };
        if won {
            let pairs: Vec<(u64, MqttStr)> = (follow_up.read_qos2.iter())
                .map(|key| (*key, follow_up.client_id.clone()))
                .collect();
            link.replays.read_back.note(&pairs);
            let until = SystemTime::now() + INSTALL_MARGIN;
            link.replays.arrivals.arrived(&follow_up.client_id, until);
            let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let running = Arc::clone(&self.running);
            lock(&running).insert(client_id.to_owned(), (number, follow_up.from));
            let (link, poster) = (Arc::clone(link), Arc::clone(poster));
            tokio::spawn(async move {
                let client_id = follow_up.client_id.as_str().to_owned();
                run(link, poster, follow_up, until).await;
                let mut running = lock(&running);
                if running.get(&client_id).is_some_and(|(n, _)| *n == number) {
                    running.remove(&client_id);
                }
            });
        }
    }

    /// Where the earliest follow-up answered and not done yet starts: carried, beside the
    /// start of the node replays due, in the heartbeat and the "alive at" stamp (`ownership.rs`),
    /// so that this node's next run after its death, or the node that recovers its sessions,
    /// reads from there. Why: in the 300-fault run of seed 5050 on 6e66b59 (308.5 s) a node
    /// recovered a session whose read timed out, its follow-up (from 25 s back) retried its
    /// reads while JetStream stalled, and the node was killed 28 s later before it was done;
    /// its next run read from its last stamp, and the subscriber lost 0.6 s of every
    /// publisher's messages (850), those only that follow-up would have routed to it.
    pub(super) fn earliest_unfinished(&self) -> Option<SystemTime> {
        let running = lock(&self.running);
        running.values().map(|(_, from)| *from).min()
    }

    /// Where the follow-up of `client_id`'s session starts while it is not done (waiting for
    /// its claim's answer, or reading): a node releasing the session meanwhile hands this
    /// start on with it, since this follow-up's messages no longer reach the session here.
    pub(super) fn unfinished_from(&self, client_id: &str) -> Option<SystemTime> {
        let waiting = lock(&self.waiting).get(client_id).map(|f| f.from);
        waiting.or_else(|| lock(&self.running).get(client_id).map(|(_, from)| *from))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Routes to the session alone what was kept on its subjects from `follow_up.from` until
/// `until`, then asks for a node replay from `until` (from `follow_up.from` when the read
/// fails: it then covers what other nodes published, counted as a failure).
async fn run(link: Arc<Link>, poster: Inbox, follow_up: FollowUp, until: SystemTime) {
    tokio::time::sleep(FOLLOW_UP_DELAY).await;
    let Some(stream) = link.replays.stream.get() else {
        return;
    };
    let FollowUp {
        client_id,
        subjects,
        from,
        already,
        ..
    } = follow_up;
    let read = match read_kept_retried(&link, stream, &subjects, (from, READ_TIMEOUT, READ_RETRIES))
        .await
    {
        Ok(read) => read,
        Err(e) => {
            warn!(client = %client_id, error = %e, "cluster: the follow-up read of a recovered session failed; a node replay covers what other nodes published");
            ClusterCounters::add(&link.counters.sessions_replay_failures, 1);
            link.replays.arrivals.uncovered(&client_id);
            return link.replays.request_from(from);
        }
    };
    let since = from.checked_sub(JOURNAL_SLACK).unwrap_or(from);
    let delivered = sent_to(&link, &client_id, since).await;
    // What the session was sent at QoS 2, here or on another node, did not pass this node's
    // duplicate check (it came from the session's queue, or on another node): a node replay
    // reaching back over it skips the session.
    let sent: Vec<(u64, MqttStr)> = (delivered.sent_keys())
        .map(|key| (key, client_id.clone()))
        .collect();
    link.replays.read_back.note(&sent);
    let publishes: Vec<ClusterPublish> = read
        .kept
        .into_iter()
        .filter(|kept| kept.kept_at <= until)
        .filter(|kept| {
            let key = kept.publish.key;
            !already.contains(&key) && !delivered.has_sent(key)
        })
        .map(|kept| ClusterPublish {
            scope: Scope::Session(client_id.clone()),
            ..kept.publish
        })
        .collect();
    ClusterCounters::add(&link.counters.sessions_replayed, publishes.len() as u64);
    post_read_back(&link, &poster, publishes);
    link.replays.request_from(until);
}

/// What every node run has sent `client_id` at QoS 2 since `since`, by their delivery
/// journals: the follow-up does not deliver those again (the shard leaves out what it still
/// holds a copy of). Every run, not only this one and the one that released the session: a
/// follow-up can start before the releasing run did (its node restarted, and its read of what
/// its sessions missed while down had failed, so its replay from before the restart was due),
/// and the 300-fault run of seed 5050 on 045854f (1,452 s) gave both subscribers about 1,350
/// QoS 2 messages a second time so, which the releasing node's earlier run had delivered. The
/// read is tried up to [`JOURNAL_TRIES`] times, [`READ_RETRY`] apart. Why: in the 300-fault
/// run of seed 5050 on 40c9782 (1,421.5 s) a follow-up's read of this run's journal timed out
/// once, while a NATS server was down, and the session got 162 QoS 2 messages it had live a
/// second time. Nothing when the journal is not open or cannot be read (logged: some may come
/// twice).
async fn sent_to(link: &Link, client_id: &MqttStr, since: SystemTime) -> Deliveries {
    let retries = Retries {
        tries: JOURNAL_TRIES,
        apart: READ_RETRY,
        what: "a follow-up's journal read",
    };
    let bounds = (retries, READ_TIMEOUT);
    match sent_by_every_run(link, client_id.as_str(), since, bounds).await {
        Ok(deliveries) => deliveries,
        Err(e) => {
            warn!(client = %client_id, error = %e, "cluster: the delivery journals were not read for a follow-up; QoS 2 messages the session had live may come again");
            Deliveries::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_unfinished_follow_up_is_where_a_restart_reads_from() {
        let follow_ups = FollowUps::default();
        assert_eq!(follow_ups.earliest_unfinished(), None);
        let now = SystemTime::now();
        let earlier = now - Duration::from_secs(25);
        lock(&follow_ups.running).insert("a".to_owned(), (1, now));
        lock(&follow_ups.running).insert("b".to_owned(), (2, earlier));
        assert_eq!(follow_ups.earliest_unfinished(), Some(earlier));
        lock(&follow_ups.running).remove("b");
        assert_eq!(
            follow_ups.earliest_unfinished(),
            Some(now),
            "once b's is done"
        );
    }

    fn follow_up_from(at: SystemTime) -> FollowFrom {
        FollowFrom {
            from: at,
            already: HashSet::new(),
            read_qos2: Vec::new(),
        }
    }

    #[test]
    fn a_follow_up_is_unfinished_while_it_waits_for_its_answer_or_reads() {
        let follow_ups = FollowUps::default();
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_595_000);
        let client = MqttStr::try_from("dev-1").unwrap();
        assert_eq!(follow_ups.unfinished_from("dev-1"), None);
        follow_ups.prepare(client.clone(), vec!["p.rel.a".into()], follow_up_from(at));
        assert_eq!(
            follow_ups.unfinished_from("dev-1"),
            Some(at),
            "waiting for its answer"
        );
        lock(&follow_ups.waiting).remove("dev-1");
        lock(&follow_ups.running).insert("dev-1".into(), (7, at));
        assert_eq!(follow_ups.unfinished_from("dev-1"), Some(at), "reading");
        follow_ups.prepare(client, Vec::new(), follow_up_from(at));
        assert_eq!(
            lock(&follow_ups.waiting).get("dev-1").map(|f| f.from),
            None,
            "nothing kept to follow up"
        );
    }
}
