//! Between the broker's message copies and what the engines store: the shared message parts
//! as encoded once, and times on the wall clock (a monotonic `Instant` means nothing after a
//! restart).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use codec::SharedPublish;
use session_store::InflightState;
use session_store::storage::{StoredMessage, StoredSession, StoredSubscription};

use crate::message::{Message, Outgoing};
use crate::session::Session;

/// `at` (on the broker's clock, which reads `now`) as a wall-clock time.
pub fn instant_to_system(at: Instant, now: Instant) -> SystemTime {
    let wall = SystemTime::now();
    match at.checked_duration_since(now) {
        Some(ahead) => wall + ahead,
        None => wall - now.duration_since(at),
    }
}

/// A wall-clock time as an instant on the broker's clock (which reads `now`); a time already
/// past comes back as `now`.
pub fn system_to_instant(at: SystemTime, now: Instant) -> Instant {
    match at.duration_since(SystemTime::now()) {
        Ok(ahead) => now + ahead,
        Err(_) => now,
    }
}

/// What the engines store of one copy, its key included (a node of a cluster back with its
/// store skips by it what the session holds already: docs/cluster.md, "When a node restarts").
pub fn stored_message(outgoing: &Outgoing, now: Instant) -> StoredMessage {
    let mut stored = stored_parts(&outgoing.message, outgoing.qos, outgoing.retain, now);
    stored.sub_ids = outgoing.sub_ids().to_vec();
    stored.key = outgoing.message.key;
    stored
}

/// A whole session as the engines store it (to move it to another node): its queue and
/// inflight copies, subscriptions and inbound QoS 2 ids; no will (a session that moves leaves
/// it behind, as in any takeover) and no disconnect time (a client is taking it over now).
pub fn stored_session_of(session: &Session, now: Instant) -> StoredSession {
    let mut stored = StoredSession::new(
        session.client_id.clone(),
        session.protocol,
        session.expiry,
        None,
    );
    stored.subscriptions = session
        .subscriptions
        .iter()
        .map(|(filter, subscription)| StoredSubscription {
            filter: filter.clone(),
            options: subscription.options,
            id: subscription.id,
        })
        .collect();
    stored.queued = session
        .queue
        .iter()
        .map(|outgoing| (outgoing.seq, stored_message(outgoing, now)))
        .collect();
    stored.inflight = session
        .inflight
        .iter()
        .map(|(id, state)| (id, stored_state(state, now)))
        .collect();
    stored.awaiting_release = session.awaiting_release().collect();
    stored
}

fn stored_state(state: &InflightState<Outgoing>, now: Instant) -> InflightState<StoredMessage> {
    match state {
        InflightState::AwaitingPubAck(m) => InflightState::AwaitingPubAck(stored_message(m, now)),
        InflightState::AwaitingPubRec(m) => InflightState::AwaitingPubRec(stored_message(m, now)),
        InflightState::AwaitingPubComp => InflightState::AwaitingPubComp,
    }
}

/// What the engines store of a retained message (delivered with the QoS it was published
/// with, RETAIN set), with when this node accepted it from a client.
pub fn stored_retained(
    message: &Message,
    now: Instant,
    accepted_at: Option<std::time::SystemTime>,
) -> StoredMessage {
    let mut stored = stored_parts(message, message.qos, true, now);
    stored.accepted_at = accepted_at;
    stored
}

/// What the engines store of a delayed message (`$delayed/`): the message as it will be
/// published, its own QoS and RETAIN.
pub fn stored_delayed_message(message: &Message, now: Instant) -> StoredMessage {
    stored_parts(message, message.qos, message.retain, now)
}

fn stored_parts(message: &Message, qos: codec::QoS, retain: bool, now: Instant) -> StoredMessage {
    StoredMessage {
        topic: message.publish.topic().as_shared_bytes().clone(),
        payload: message.publish.payload().clone(),
        qos,
        retain,
        properties: message.publish.shared_properties().clone(),
        expires_at: message.expires_at.map(|at| instant_to_system(at, now)),
        sub_ids: Vec::new(),
        accepted_at: None,
        key: 0,
    }
}

/// A stored message as a shared message (the retained store and queue entries hold these).
pub fn message_from_stored(stored: &StoredMessage, now: Instant) -> Option<Arc<Message>> {
    let topic = codec::MqttStr::from_bytes(stored.topic.clone()).ok()?;
    let publish =
        SharedPublish::from_parts(topic, stored.payload.clone(), stored.properties.clone()).ok()?;
    Some(Arc::new(Message {
        publish,
        qos: stored.qos,
        retain: stored.retain,
        expires_at: stored.expires_at.map(|at| system_to_instant(at, now)),
        received_ns: 0,
        key: stored.key,
    }))
}

/// A stored copy back as a copy for a session, `seq` its place in the session's stored queue.
pub fn outgoing_from_stored(stored: &StoredMessage, seq: u64, now: Instant) -> Option<Outgoing> {
    let message = message_from_stored(stored, now)?;
    let copy = Outgoing::new(message, stored.qos, stored.retain, &stored.sub_ids, None);
    Some(copy.with_seq(seq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn times_survive_the_round_trip_to_the_wall_clock() {
        let now = Instant::now();
        let later = now + Duration::from_secs(30);
        let back = system_to_instant(instant_to_system(later, now), now);
        let diff = back.max(later) - back.min(later);
        assert!(diff < Duration::from_secs(1), "{diff:?}");
        let past = instant_to_system(now, now + Duration::from_secs(5));
        assert_eq!(system_to_instant(past, now), now, "a past time is now");
    }
}
