//! [`RecordingStorage`]: the in-memory model of a durable engine. It applies writes to a
//! `BTreeMap` of [`StoredSession`]s and keeps every committed write; `load` returns the model.
//! Durable engines are tested against it (same writes, same `load`, with restarts between).

use std::collections::BTreeMap;

use codec::{MqttStr, QoS};

use super::{Recovered, SessionStorage, SessionWrite, StorageError, StoredSession};
use crate::InflightState;

/// The model engine: applies each batch to a map of sessions, all or nothing.
#[derive(Debug, Default)]
pub struct RecordingStorage {
    sessions: BTreeMap<MqttStr, StoredSession>,
    committed: Vec<SessionWrite>,
    failing: bool,
}

impl RecordingStorage {
    /// Every write committed so far, in order.
    pub fn committed(&self) -> &[SessionWrite] {
        &self.committed
    }

    /// Makes every later `commit` fail (`true`) as a broken engine would, or work again.
    pub fn set_failing(&mut self, failing: bool) {
        self.failing = failing;
    }
}

impl SessionStorage for RecordingStorage {
    fn load(&mut self) -> Result<Recovered, StorageError> {
        Ok(Recovered {
            sessions: self.sessions.values().cloned().collect(),
        })
    }

    fn commit(&mut self, batch: &[SessionWrite]) -> Result<(), StorageError> {
        if self.failing {
            return Err(StorageError::Engine {
                engine: "recording",
                reason: "set to fail".to_owned(),
            });
        }
        let mut next = self.sessions.clone();
        for write in batch {
            apply(&mut next, write).map_err(|()| inconsistent(write))?;
        }
        self.sessions = next;
        self.committed.extend_from_slice(batch);
        Ok(())
    }
}

/// The error for a write that does not follow the stored state.
pub(super) fn inconsistent(write: &SessionWrite) -> StorageError {
    StorageError::Inconsistent {
        write: write.kind(),
        client_id: String::from_utf8_lossy(write.client_id().as_bytes()).into_owned(),
    }
}

/// Applies one write; `Err` if it does not follow the model's state (the durable engines apply
/// batches with it too, so every engine refuses the same writes).
pub(super) fn apply(
    sessions: &mut BTreeMap<MqttStr, StoredSession>,
    write: &SessionWrite,
) -> Result<(), ()> {
    match write {
        SessionWrite::SessionSaved {
            client_id,
            protocol,
            expiry,
            will,
        } => {
            let session = sessions
                .entry(client_id.clone())
                .or_insert_with(|| StoredSession::new(client_id.clone(), *protocol, *expiry, None));
            session.protocol = *protocol;
            session.expiry = *expiry;
            session.will.clone_from(will);
            session.disconnected_at = None;
            Ok(())
        }
        SessionWrite::SessionRemoved { client_id } => {
            sessions.remove(client_id);
            Ok(())
        }
        _ => {
            let session = sessions.get_mut(write.client_id()).ok_or(())?;
            apply_to_session(session, write)
        }
    }
}

/// Applies a write to an existing session.
fn apply_to_session(session: &mut StoredSession, write: &SessionWrite) -> Result<(), ()> {
    match write {
        SessionWrite::SessionDisconnected { at, .. } => {
            session.disconnected_at = Some(*at);
            Ok(())
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
            match session
                .subscriptions
                .iter_mut()
                .find(|s| s.filter == *filter)
            {
                Some(existing) => *existing = stored,
                None => session.subscriptions.push(stored),
            }
            Ok(())
        }
        SessionWrite::Unsubscribed { filter, .. } => {
            let at = position(&session.subscriptions, |s| s.filter == *filter)?;
            session.subscriptions.remove(at);
            Ok(())
        }
        _ => apply_to_messages(session, write),
    }
}

/// Applies a queue, inflight or inbound QoS 2 write.
fn apply_to_messages(session: &mut StoredSession, write: &SessionWrite) -> Result<(), ()> {
    match write {
        SessionWrite::MessageQueued { seq, message, .. } => {
            if session.queued.last().is_some_and(|(last, _)| last >= seq) {
                return Err(());
            }
            session.queued.push((*seq, message.clone()));
        }
        SessionWrite::MessageDropped { seq, .. } => {
            let at = position(&session.queued, |(s, _)| s == seq)?;
            session.queued.remove(at);
        }
        SessionWrite::InflightSent { seq, packet_id, .. } => {
            if session.inflight.iter().any(|(id, _)| id == packet_id) {
                return Err(());
            }
            let at = position(&session.queued, |(s, _)| s == seq)?;
            let (_, message) = session.queued.remove(at);
            let state = match message.qos {
                QoS::AtMostOnce => return Err(()),
                QoS::AtLeastOnce => InflightState::AwaitingPubAck(message),
                QoS::ExactlyOnce => InflightState::AwaitingPubRec(message),
            };
            session.inflight.push((*packet_id, state));
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

fn position<T>(items: &[T], pred: impl FnMut(&T) -> bool) -> Result<usize, ()> {
    items.iter().position(pred).ok_or(())
}

#[cfg(test)]
#[path = "recording_tests.rs"]
mod tests;
