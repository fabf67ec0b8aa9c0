//! [`Arrivals`]: the sessions that came to this node from another node run (a live node's
//! release, a dead node's mirror, or this node's previous run through its store) and up to
//! when the reads that came with them cover what was kept for them (docs/cluster.md,
//! "Exactly once across a node's death").
//!
//! A message kept before that moment was the earlier node's to deliver (delivered, or in the
//! session's snapshot or store), or this node's claim read it back for the session alone,
//! leaving out what the earlier node's journal says it sent. A node replay (after a loss of
//! this node's NATS connection, or another node's) reads from seconds before the loss, and
//! this node's duplicate check knows nothing of what the earlier node delivered: routed to
//! such a session, those messages came a second time. So a replayed message skips the
//! sessions whose coverage reaches past the moment it was kept. Why: in the 300-fault run of
//! seed 5050 on 40c9782 (1,007.3 s) two sessions released to a node 1 s before its pending
//! node replay ran each got 448 QoS 2 messages a second time, delivered by their earlier
//! node before its death.
//!
//! A session whose follow-up read failed is not covered (the node replay that stands in must
//! reach it). Bounded: the last [`MAX_NOTED`] arrivals, none older than [`MAX_AGE`]. A
//! replayed message looks up only the arrivals covered past its time (an ordered index), not
//! every arrival remembered.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use codec::MqttStr;

/// The most arrivals remembered.
const MAX_NOTED: usize = 1 << 16;
/// How long an arrival is remembered: a node replay reads within the replay window, and
/// reaches back seconds before the loss that asked for it.
const MAX_AGE: Duration = Duration::from_secs(3600);

/// Each arrived session and up to when its reads cover what was kept for it.
#[derive(Debug, Default)]
pub(crate) struct Arrivals(Mutex<Noted>);

#[derive(Debug, Default)]
struct Noted {
    covered: HashMap<MqttStr, SystemTime>,
    /// `covered` ordered by time.
    by_time: BTreeSet<(SystemTime, MqttStr)>,
    /// Arrivals in the order noted, oldest first (an entry whose session arrived again since
    /// names a later time than its record: skipped when it is pruned).
    order: VecDeque<(MqttStr, SystemTime)>,
}

impl Arrivals {
    /// `client_id`'s session arrived; what was kept for it before `covered_until` is read
    /// back for it alone, or was its earlier node's.
    pub(crate) fn arrived(&self, client_id: &MqttStr, covered_until: SystemTime) {
        let mut noted = self.lock();
        noted.remove(client_id);
        noted.covered.insert(client_id.clone(), covered_until);
        noted.by_time.insert((covered_until, client_id.clone()));
        noted.order.push_back((client_id.clone(), covered_until));
        noted.prune(SystemTime::now());
    }

    /// `client_id`'s session is not covered after all (its follow-up read failed).
    pub(crate) fn uncovered(&self, client_id: &MqttStr) {
        self.lock().remove(client_id);
    }

    /// The sessions that a message kept at `kept_at` and replayed now must skip.
    pub(crate) fn covering(&self, kept_at: SystemTime) -> Vec<MqttStr> {
        let noted = self.lock();
        (noted.by_time.range((kept_at, MqttStr::default())..))
            .filter(|(until, _)| *until > kept_at)
            .map(|(_, client_id)| client_id.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Noted> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Noted {
    /// Forgets `client_id`'s coverage.
    fn remove(&mut self, client_id: &MqttStr) {
        if let Some(until) = self.covered.remove(client_id) {
            self.by_time.remove(&(until, client_id.clone()));
        }
    }

    /// Forgets the arrivals beyond [`MAX_NOTED`] and those older than [`MAX_AGE`].
    fn prune(&mut self, now: SystemTime) {
        let too_old = now.checked_sub(MAX_AGE).unwrap_or(SystemTime::UNIX_EPOCH);
        while let Some((client_id, until)) = self.order.front() {
            if self.order.len() <= MAX_NOTED && *until >= too_old {
                break;
            }
            if self.covered.get(client_id) == Some(until) {
                let client_id = client_id.clone();
                self.remove(&client_id);
            }
            self.order.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> MqttStr {
        MqttStr::try_from(text).unwrap()
    }

    #[test]
    fn a_replayed_message_skips_the_sessions_covered_past_its_time() {
        let arrivals = Arrivals::default();
        let now = SystemTime::now();
        let second = Duration::from_secs(1);
        arrivals.arrived(&id("a"), now);
        arrivals.arrived(&id("b"), now + second);
        let mut covering = arrivals.covering(now - second);
        covering.sort_by(|x, y| x.as_str().cmp(y.as_str()));
        assert_eq!(covering, vec![id("a"), id("b")]);
        assert_eq!(
            arrivals.covering(now),
            vec![id("b")],
            "kept at a's coverage end"
        );
        assert!(arrivals.covering(now + second).is_empty());
        arrivals.uncovered(&id("b"));
        assert_eq!(arrivals.covering(now - second), vec![id("a")]);
    }

    #[test]
    fn old_arrivals_are_forgotten() {
        let arrivals = Arrivals::default();
        let long_ago = SystemTime::now() - MAX_AGE - Duration::from_secs(1);
        arrivals.arrived(&id("old"), long_ago);
        arrivals.arrived(&id("new"), SystemTime::now());
        assert_eq!(
            arrivals.covering(long_ago - Duration::from_secs(1)),
            vec![id("new")]
        );
    }

    #[test]
    fn a_session_arriving_again_is_covered_to_its_latest_arrival_alone() {
        let arrivals = Arrivals::default();
        let now = SystemTime::now();
        let second = Duration::from_secs(1);
        arrivals.arrived(&id("a"), now + second);
        arrivals.arrived(&id("a"), now - second);
        assert!(
            arrivals.covering(now).is_empty(),
            "the earlier coverage is gone"
        );
        assert_eq!(arrivals.covering(now - second * 2), vec![id("a")], "once");
        arrivals.uncovered(&id("a"));
        assert!(arrivals.covering(now - second * 2).is_empty());
    }
}
