//! [`ReadBack`]: the QoS 2 messages read back from the replay stream for one session alone
//! (`Scope::Session`: a recovered session's first read and follow-up, a restart's catch-up),
//! and those a session's follow-up finds in the delivery journals of this run and of the run
//! that released it (sent from 7 s before the follow-up's start), remembered so that the same
//! message coming to this node again for its plain subscriptions skips the sessions that had
//! it (docs/cluster.md, "Exactly once across a node's death").
//!
//! Why: the inbound duplicate check (`inbound.rs`, `Seen`) knows the messages that came for
//! the node's plain subscriptions only; a copy read back for one session is not noted there
//! (the node's other sessions did not get it). So a node replay after a loss of the node's
//! NATS connection (or the message arriving late over a route) routed it to every matching
//! session, the recovered one included: a QoS 2 message twice once that session had completed
//! it. The 300-fault run of seed 5050 on 56e165a had 908 QoS 2 messages twice so at 1,008 s.
//! QoS 0 and 1 messages are not noted (QoS 1 allows a second delivery).
//!
//! Bounded: the last [`MAX_NOTED`] (message, session) pairs; an older pair's message coming
//! again may reach its session twice.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use broker_api::cluster::{ClusterPublish, Scope};
use codec::{MqttStr, QoS};

/// The most (message, session) pairs remembered (a follow-up reads at most
/// `queues.max_queued_messages` for its session; a node replay comes seconds later).
const MAX_NOTED: usize = 1 << 16;

/// The sessions each recent QoS 2 message was read back for.
#[derive(Debug, Default)]
pub(crate) struct ReadBack {
    /// Whether anything was ever noted: until then the inbound path takes no lock.
    any: AtomicBool,
    noted: Mutex<Noted>,
}

#[derive(Debug, Default)]
struct Noted {
    sessions: HashMap<u64, Vec<MqttStr>>,
    /// The pairs in the order noted, oldest first.
    order: VecDeque<(u64, MqttStr)>,
}

/// A QoS 2 message's key and the session it was read back for.
pub(crate) type ReadBackPair = (u64, MqttStr);

impl ReadBack {
    /// Notes `pairs` (messages read back for one session alone, about to be posted).
    pub(crate) fn note(&self, pairs: &[ReadBackPair]) {
        if pairs.is_empty() {
            return;
        }
        let mut noted = self.noted.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, session) in pairs {
            noted.add(*key, session.clone());
        }
        self.any.store(true, Ordering::Release);
    }

    /// Forgets `pairs` again (their batch was not posted). Their places in the order stay
    /// until they are the oldest (the bound counts them).
    pub(crate) fn forget(&self, pairs: &[ReadBackPair]) {
        let mut noted = self.noted.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, session) in pairs {
            noted.remove_from_sessions(*key, session);
        }
    }

    /// The sessions the QoS 2 message `key` was read back for (none for key 0).
    pub(crate) fn sessions_that_had(&self, key: u64) -> Vec<MqttStr> {
        if key == 0 || !self.any.load(Ordering::Acquire) {
            return Vec::new();
        }
        let noted = self.noted.lock().unwrap_or_else(PoisonError::into_inner);
        noted.sessions.get(&key).cloned().unwrap_or_default()
    }
}

/// `publish`'s key and session, if it is a keyed QoS 2 message read back for one session.
pub(crate) fn read_back_pair(publish: &ClusterPublish) -> Option<ReadBackPair> {
    match &publish.scope {
        Scope::Session(session) if publish.qos == QoS::ExactlyOnce && publish.key != 0 => {
            Some((publish.key, session.clone()))
        }
        _ => None,
    }
}

impl Noted {
    fn add(&mut self, key: u64, session: MqttStr) {
        let sessions = self.sessions.entry(key).or_default();
        if sessions.contains(&session) {
            return;
        }
        sessions.push(session.clone());
        self.order.push_back((key, session));
        if self.order.len() > MAX_NOTED
            && let Some((oldest, session)) = self.order.pop_front()
        {
            self.remove_from_sessions(oldest, &session);
        }
    }

    fn remove_from_sessions(&mut self, key: u64, session: &MqttStr) {
        let Some(sessions) = self.sessions.get_mut(&key) else {
            return;
        };
        sessions.retain(|s| s != session);
        if sessions.is_empty() {
            self.sessions.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn publish(scope: Scope, qos: QoS, key: u64) -> ClusterPublish {
        ClusterPublish {
            topic: MqttStr::try_from("t").unwrap(),
            payload: Bytes::new(),
            properties: Bytes::new(),
            qos,
            retain: false,
            expiry: None,
            scope,
            key,
        }
    }

    fn session(id: &str) -> MqttStr {
        MqttStr::try_from(id).unwrap()
    }

    fn note(read_back: &ReadBack, publishes: &[ClusterPublish]) {
        let pairs: Vec<ReadBackPair> = publishes.iter().filter_map(read_back_pair).collect();
        read_back.note(&pairs);
    }

    #[test]
    fn only_keyed_qos_2_messages_read_back_for_a_session_are_noted() {
        let read_back = ReadBack::default();
        assert!(read_back.sessions_that_had(1).is_empty());
        note(
            &read_back,
            &[
                publish(Scope::Session(session("a")), QoS::ExactlyOnce, 1),
                publish(Scope::Session(session("b")), QoS::ExactlyOnce, 1),
                publish(Scope::Session(session("a")), QoS::AtLeastOnce, 2),
                publish(Scope::Plain, QoS::ExactlyOnce, 3),
                publish(Scope::Session(session("a")), QoS::ExactlyOnce, 0),
            ],
        );
        assert_eq!(read_back.sessions_that_had(1), [session("a"), session("b")]);
        for key in [0, 2, 3] {
            assert!(read_back.sessions_that_had(key).is_empty(), "key {key}");
        }
    }

    #[test]
    fn a_batch_not_posted_is_forgotten() {
        let read_back = ReadBack::default();
        let pairs = [(7, session("a"))];
        read_back.note(&pairs);
        read_back.forget(&pairs);
        assert!(read_back.sessions_that_had(7).is_empty());
        assert!(read_back.noted.lock().unwrap().sessions.is_empty());
    }

    #[test]
    fn the_oldest_pairs_go_beyond_the_bound() {
        let read_back = ReadBack::default();
        let pairs: Vec<ReadBackPair> = (1..=MAX_NOTED as u64 + 2)
            .map(|key| (key, session("a")))
            .collect();
        read_back.note(&pairs);
        assert!(read_back.sessions_that_had(1).is_empty());
        assert!(read_back.sessions_that_had(2).is_empty());
        assert_eq!(read_back.sessions_that_had(3), [session("a")]);
        assert_eq!(read_back.noted.lock().unwrap().order.len(), MAX_NOTED);
    }
}
