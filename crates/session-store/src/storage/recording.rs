//! [`RecordingStorage`]: the in-memory model of a durable engine. It applies writes one by one
//! to `BTreeMap`s of [`StoredSession`]s, retained and delayed messages, skipping those that do not follow
//! the state, and keeps every committed write; `load` returns the model. Durable engines are
//! tested against it (same writes, same skips, same `load`, with restarts between).

use std::collections::BTreeMap;

use codec::{MqttStr, QoS};

use super::{
    Committed, MessageSeq, Recovered, SessionStorage, SessionWrite, Skipped, StorageError,
    StoredDelayed, StoredMessage, StoredSession,
};
use crate::InflightState;

/// The model engine: applies each write of a batch to maps of sessions and retained messages,
/// skipping (and reporting) those that do not follow the state.
#[derive(Debug, Default)]
pub struct RecordingStorage {
    sessions: BTreeMap<MqttStr, StoredSession>,
    retained: BTreeMap<MqttStr, StoredMessage>,
    delayed: BTreeMap<u64, StoredDelayed>,
    committed: Vec<SessionWrite>,
    failing: bool,
}

impl RecordingStorage {
    /// Every write of every committed batch so far, in order (skipped writes included).
    pub fn committed(&self) -> &[SessionWrite] {
        &self.committed
    }

    /// Makes every later `commit` fail (`true`) as a broken engine would, or work again.
    pub fn set_failing(&mut self, failing: bool) {
        self.failing = failing;
    }

    fn fail_if_set(&self) -> Result<(), StorageError> {
        if self.failing {
            return Err(StorageError::Engine {
                engine: "recording",
                reason: "set to fail".to_owned(),
            });
        }
        Ok(())
    }
}

impl SessionStorage for RecordingStorage {
    fn load(&mut self) -> Result<Recovered, StorageError> {
        let sessions = (self.sessions.values())
            .map(|session| {
                let mut session = session.clone();
                session.awaiting_release.sort_unstable();
                session
            })
            .collect();
        Ok(Recovered {
            sessions,
            retained: (self.retained.iter())
                .map(|(topic, m)| (topic.clone(), m.clone()))
                .collect(),
            delayed: (self.delayed.iter())
                .map(|(id, d)| (*id, d.clone()))
                .collect(),
        })
    }

    fn commit(&mut self, batch: &[SessionWrite]) -> Result<Committed, StorageError> {
        self.fail_if_set()?;
        let mut committed = Committed::default();
        for write in batch {
            let applied = match write {
                SessionWrite::RetainSet { topic, message } => {
                    self.retained.insert(topic.clone(), (**message).clone());
                    Ok(())
                }
                SessionWrite::RetainCleared { topic } => {
                    self.retained.remove(topic);
                    Ok(())
                }
                SessionWrite::DelayedSet { id, delayed } => {
                    self.delayed.insert(*id, (**delayed).clone());
                    Ok(())
                }
                SessionWrite::DelayedCleared { id } => {
                    self.delayed.remove(id);
                    Ok(())
                }
                _ => apply(&mut self.sessions, write),
            };
            if applied.is_err() {
                committed.skipped.push(Skipped::of(write));
            }
        }
        self.committed.extend_from_slice(batch);
        Ok(committed)
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.fail_if_set()
    }

    fn queued_after(
        &mut self,
        client_id: &MqttStr,
        after: Option<MessageSeq>,
        limit: usize,
    ) -> Result<Vec<(MessageSeq, StoredMessage)>, StorageError> {
        let Some(session) = self.sessions.get(client_id) else {
            return Ok(Vec::new());
        };
        Ok((session.queued.iter())
            .filter(|(seq, _)| after.is_none_or(|after| *seq > after))
            .take(limit)
            .cloned()
            .collect())
    }
}

/// Applies one session write; `Err` (and no change) if it does not follow the model's state.
/// Retained- and delayed-message writes are not a session's: `Err` here.
fn apply(sessions: &mut BTreeMap<MqttStr, StoredSession>, write: &SessionWrite) -> Result<(), ()> {
    match write {
        SessionWrite::SessionSaved {
            client_id,
            protocol,
            expiry,
            ..
        } => {
            let session = sessions
                .entry(client_id.clone())
                .or_insert_with(|| StoredSession::new(client_id.clone(), *protocol, *expiry, None));
            save(session, write);
            Ok(())
        }
        SessionWrite::SessionRemoved { client_id } => {
            sessions.remove(client_id);
            Ok(())
        }
        SessionWrite::MessageQueued { .. }
        | SessionWrite::MessageDropped { .. }
        | SessionWrite::InflightSent { .. }
        | SessionWrite::MessageSent { .. }
        | SessionWrite::InflightReleased { .. }
        | SessionWrite::InflightAcked { .. } => {
            let session = session_of(sessions, write)?;
            apply_to_messages(session, write)
        }
        _ => apply_to_record(session_of(sessions, write)?, write),
    }
}

fn session_of<'a>(
    sessions: &'a mut BTreeMap<MqttStr, StoredSession>,
    write: &SessionWrite,
) -> Result<&'a mut StoredSession, ()> {
    let client_id = write.client_id().ok_or(())?;
    sessions.get_mut(client_id).ok_or(())
}

/// Applies `SessionSaved` to its (possibly just created) session: the connection-scoped state
/// (its owner included) is replaced and the session is connected again. Other writes are ignored.
pub(super) fn save(session: &mut StoredSession, write: &SessionWrite) {
    if let SessionWrite::SessionSaved {
        protocol,
        expiry,
        will,
        owner,
        ..
    } = write
    {
        session.protocol = *protocol;
        session.expiry = *expiry;
        session.will = will.as_deref().cloned();
        session.owner = (**owner).clone();
        session.disconnected_at = None;
    }
}

/// Applies a write that changes only a session's record (its connection-scoped state,
/// subscriptions and inbound QoS 2 ids): `SessionDisconnected`, `Subscribed`, `Unsubscribed`,
/// `Qos2Received`, `Qos2Released`. `Err` (and no change) if it does not follow the state or is
/// another kind (the durable engines keep records in memory and apply these with it too).
pub(super) fn apply_to_record(session: &mut StoredSession, write: &SessionWrite) -> Result<(), ()> {
    match write {
        SessionWrite::SessionDisconnected { at, .. } => {
            session.disconnected_at = Some(*at);
        }
        SessionWrite::Subscribed {
            filter,
            options,
            id,
            ..
        } => {
            let stored = super::StoredSubscription {
                filter: filter.clone(),
                options: *options,
                id: *id,
            };
            match (session.subscriptions.iter_mut()).find(|s| s.filter == *filter) {
                Some(existing) => *existing = stored,
                None => session.subscriptions.push(stored),
            }
        }
        SessionWrite::Unsubscribed { filter, .. } => {
            let at = position(&session.subscriptions, |s| s.filter == *filter)?;
            session.subscriptions.remove(at);
        }
        SessionWrite::Qos2Received { packet_id, .. } => {
            if session.awaiting_release.contains(packet_id) {
                return Err(());
            }
            session.awaiting_release.push(*packet_id);
        }
        SessionWrite::Qos2Released { packet_id, .. } => {
            let at = position(&session.awaiting_release, |id| id == packet_id)?;
            session.awaiting_release.remove(at);
        }
        _ => return Err(()),
    }
    Ok(())
}

/// The first inflight state of a QoS 1/2 `message` just sent.
fn awaiting_ack(message: StoredMessage) -> InflightState<StoredMessage> {
    if message.qos == QoS::AtLeastOnce {
        InflightState::AwaitingPubAck(message)
    } else {
        InflightState::AwaitingPubRec(message)
    }
}

/// Applies a queue or inflight write.
fn apply_to_messages(session: &mut StoredSession, write: &SessionWrite) -> Result<(), ()> {
    match write {
        SessionWrite::MessageQueued { seq, message, .. } => {
            if session.queued.last().is_some_and(|(last, _)| last >= seq) {
                return Err(());
            }
            session.queued.push((*seq, (**message).clone()));
        }
        SessionWrite::MessageDropped { seq, .. } => {
            let at = position(&session.queued, |(s, _)| s == seq)?;
            session.queued.remove(at);
        }
        SessionWrite::InflightSent { seq, packet_id, .. } => {
            if session.inflight.iter().any(|(id, _)| id == packet_id) {
                return Err(());
            }
            let at = position(&session.queued, |(s, m)| {
                s == seq && m.qos != QoS::AtMostOnce
            })?;
            let (_, message) = session.queued.remove(at);
            session.inflight.push((*packet_id, awaiting_ack(message)));
        }
        SessionWrite::MessageSent {
            seq,
            packet_id,
            message,
            ..
        } => {
            let queued_above = session.queued.last().is_some_and(|(last, _)| last >= seq);
            let in_flight = session.inflight.iter().any(|(id, _)| id == packet_id);
            if queued_above || in_flight || message.qos == QoS::AtMostOnce {
                return Err(());
            }
            (session.inflight).push((*packet_id, awaiting_ack((**message).clone())));
        }
        SessionWrite::InflightReleased { packet_id, .. } => {
            let at = position(&session.inflight, |(id, state)| {
                id == packet_id && matches!(state, InflightState::AwaitingPubRec(_))
            })?;
            session.inflight[at].1 = InflightState::AwaitingPubComp;
        }
        SessionWrite::InflightAcked { packet_id, .. } => {
            let at = position(&session.inflight, |(id, _)| id == packet_id)?;
            session.inflight.remove(at);
        }
        _ => return Err(()),
    }
    Ok(())
}

fn position<T>(items: &[T], pred: impl FnMut(&T) -> bool) -> Result<usize, ()> {
    items.iter().position(pred).ok_or(())
}

#[cfg(test)]
#[path = "recording_tests.rs"]
mod tests;
