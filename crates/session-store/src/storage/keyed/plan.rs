//! Turning a batch into key writes from the [`Index`], with no read of a session back: record
//! writes are encoded from the index's copy of the record, acknowledgements are decided by its
//! inflight entries. The only reads: the queued message `InflightSent` moves into its inflight
//! entry, the key `MessageDropped` deletes (to know whether it is there), the keys of a removed
//! session's queue, and, rarely, a queue's last key (after its last message left while others
//! stayed). Every write is checked with the model's rules ([`crate::storage::recording`]) and
//! skipped, changing nothing, where it does not follow.

use std::collections::HashMap;

use codec::{MqttStr, PacketId, QoS};

use super::index::{Flight, Index, Indexed, LastQueued, Phase};
use super::keys::{self, QUEUED, corrupt};
use super::kv::{KeyWrite, KvRead};
use super::overlay::{self, MessageAt, Overlay, PlannedAt, PlannedWrites, Value};
use crate::InflightState;
use crate::storage::encoding::{self, Malformed};
use crate::storage::recording::{apply_to_record, save};
use crate::storage::{Committed, MessageSeq, SessionWrite, Skipped, StorageError, StoredSession};

/// Records to write at the end of the batch: whether the store holds none yet, by client.
type Dirty = HashMap<MqttStr, bool, foldhash::fast::RandomState>;

/// A batch being planned.
struct Planner<'a, 'b, K> {
    overlay: Overlay<'a, K>,
    batch: &'b [SessionWrite],
    index: &'a mut Index,
    dirty: Dirty,
    /// Sessions whose inbound QoS 2 ids the batch changed (`Indexed::awaiting_changed`), in
    /// the order first changed.
    awaiting_changed: Vec<MqttStr>,
}

/// Whether a write applied (`true`) or was skipped.
type Applied = Result<bool, StorageError>;

/// The key writes that apply `batch`, and the writes skipped because they do not follow the
/// stored state. Updates `index` as it goes: on `Err` it no longer matches the store.
pub(in crate::storage) fn plan(
    kv: &impl KvRead,
    index: &mut Index,
    planned: &mut PlannedWrites,
    batch: &[SessionWrite],
    writes: &mut Vec<KeyWrite>,
) -> Result<Committed, StorageError> {
    let mut planner = Planner {
        overlay: Overlay::new(kv, planned, batch.len()),
        batch,
        index,
        dirty: Dirty::default(),
        awaiting_changed: Vec::new(),
    };
    let mut committed = Committed::default();
    for (at, write) in batch.iter().enumerate() {
        if !planner.apply(at, write)? {
            committed.skipped.push(Skipped::of(write));
        }
    }
    planner.finish(writes);
    Ok(committed)
}

impl<'b, K: KvRead> Planner<'_, 'b, K> {
    /// Plans `write`, the batch's write at `at`.
    fn apply(&mut self, at: usize, write: &'b SessionWrite) -> Applied {
        match write {
            SessionWrite::RetainSet { topic, .. } => {
                let value = Value::Queued(at);
                self.overlay.put(keys::retained_key(topic), value, false);
                Ok(true)
            }
            SessionWrite::RetainCleared { topic } => {
                self.overlay.delete(keys::retained_key(topic));
                Ok(true)
            }
            SessionWrite::DelayedSet { id, delayed } => {
                let value = Value::Encoded(encoding::encode_delayed(delayed));
                self.overlay.put(keys::delayed_key(*id), value, false);
                Ok(true)
            }
            SessionWrite::DelayedCleared { id } => {
                self.overlay.delete(keys::delayed_key(*id));
                Ok(true)
            }
            SessionWrite::SessionSaved {
                client_id,
                protocol,
                expiry,
                ..
            } => Ok(self.save(
                client_id,
                StoredSession::new(client_id.clone(), *protocol, *expiry, None),
                write,
            )),
            SessionWrite::SessionRemoved { client_id } => self.remove(client_id),
            SessionWrite::MessageQueued { client_id, seq, .. } => self.queue(client_id, *seq, at),
            SessionWrite::MessageDropped { client_id, seq } => self.drop_queued(client_id, *seq),
            SessionWrite::InflightSent {
                client_id,
                seq,
                packet_id,
            } => self.send(client_id, *seq, *packet_id),
            SessionWrite::MessageSent {
                client_id,
                seq,
                packet_id,
                ..
            } => self.queue_and_send(client_id, *seq, *packet_id, at),
            SessionWrite::InflightReleased {
                client_id,
                packet_id,
            } => Ok(self.release(client_id, *packet_id)),
            SessionWrite::InflightAcked {
                client_id,
                packet_id,
            } => Ok(self.ack(client_id, *packet_id)),
            SessionWrite::Qos2Received { client_id, .. }
            | SessionWrite::Qos2Released { client_id, .. } => Ok(self.awaiting(client_id, write)),
            SessionWrite::SessionDisconnected { client_id, .. }
            | SessionWrite::Subscribed { client_id, .. }
            | SessionWrite::Unsubscribed { client_id, .. } => Ok(self.record(client_id, write)),
        }
    }

    /// The indexed session of `client_id`, if stored.
    fn session(&mut self, client_id: &MqttStr) -> Option<&mut Indexed> {
        self.index.sessions.get_mut(client_id)
    }

    /// `SessionSaved`: `new` is the record of a session not stored yet.
    fn save(&mut self, client_id: &MqttStr, new: StoredSession, write: &SessionWrite) -> bool {
        let created = !self.index.sessions.contains_key(client_id);
        let session =
            (self.index.sessions.entry(client_id.clone())).or_insert_with(|| Indexed::new(new));
        save(&mut session.record, write);
        self.dirty.entry(client_id.clone()).or_insert(created);
        true
    }

    fn record(&mut self, client_id: &MqttStr, write: &SessionWrite) -> bool {
        let Some(session) = self.session(client_id) else {
            return false;
        };
        if apply_to_record(&mut session.record, write).is_err() {
            return false;
        }
        self.dirty.entry(client_id.clone()).or_insert(false);
        true
    }

    /// `Qos2Received` / `Qos2Released`: checked against the indexed record; the session's ids
    /// are written once, at the batch's end ([`Self::write_awaiting`]), however many changed.
    fn awaiting(&mut self, client_id: &MqttStr, write: &SessionWrite) -> bool {
        let Some(session) = self.index.sessions.get_mut(client_id) else {
            return false;
        };
        if apply_to_record(&mut session.record, write).is_err() {
            return false;
        }
        if !std::mem::replace(&mut session.awaiting_changed, true) {
            self.awaiting_changed.push(client_id.clone());
        }
        true
    }

    /// Plans the key of `client_id`'s inbound QoS 2 ids as they stand (a deletion once none
    /// is left), and deletes those still under keys of the older layout.
    fn write_awaiting(&mut self, client_id: &MqttStr) {
        let Some(session) = self.index.sessions.get_mut(client_id) else {
            return;
        };
        if !std::mem::replace(&mut session.awaiting_changed, false) {
            return;
        }
        for id in std::mem::take(&mut session.legacy_awaiting) {
            self.overlay.delete(keys::awaiting_key(client_id, id));
        }
        let key = keys::awaiting_ids_key(client_id);
        let ids = &session.record.awaiting_release;
        if ids.is_empty() {
            if std::mem::replace(&mut session.awaiting_stored, false) {
                self.overlay.delete(key);
            }
            return;
        }
        let value = Value::Encoded(encoding::encode_awaiting_ids(ids));
        let absent_before = !std::mem::replace(&mut session.awaiting_stored, true);
        self.overlay.put(key, value, absent_before);
    }

    fn remove(&mut self, client_id: &MqttStr) -> Applied {
        let Some(session) = self.index.sessions.remove(client_id) else {
            return Ok(true);
        };
        if self.dirty.remove(client_id) != Some(true) {
            self.overlay.delete(keys::session_key(client_id));
        }
        for (id, flight) in &session.inflight {
            (self.overlay).delete_tracked(flight.planned, || keys::inflight_key(client_id, *id));
        }
        if session.awaiting_stored {
            self.overlay.delete(keys::awaiting_ids_key(client_id));
        }
        for id in &session.legacy_awaiting {
            self.overlay.delete(keys::awaiting_key(client_id, *id));
        }
        if session.queued > 0 {
            self.overlay
                .delete_prefix(&keys::prefix(QUEUED, client_id))?;
        }
        Ok(true)
    }

    fn queue(&mut self, client_id: &MqttStr, seq: MessageSeq, at: usize) -> Applied {
        let Some(last) = self.session(client_id).map(|s| s.last_queued) else {
            return Ok(false);
        };
        if !self.above_queued(client_id, last, seq)? {
            return Ok(false);
        }
        // Above every queued sequence number: the store holds no message under it.
        self.overlay
            .put(keys::queued_key(client_id, seq), Value::Queued(at), true);
        if let Some(session) = self.session(client_id) {
            session.push_queued(seq);
        }
        Ok(true)
    }

    /// Whether `seq` is above every message `client_id`'s queue holds (`last`: its last as
    /// the index knows it).
    fn above_queued(
        &self,
        client_id: &MqttStr,
        last: LastQueued,
        seq: MessageSeq,
    ) -> Result<bool, StorageError> {
        let last = match last {
            LastQueued::Empty => None,
            LastQueued::Seq(seq) => Some(seq),
            LastQueued::Unknown => self.stored_last_queued(client_id)?,
        };
        Ok(last.is_none_or(|last| last < seq))
    }

    /// The last queued sequence number as the store (with the batch so far) has it.
    fn stored_last_queued(&self, client_id: &MqttStr) -> Result<Option<MessageSeq>, StorageError> {
        let prefix = keys::prefix(QUEUED, client_id);
        match self.overlay.last_key(&prefix)? {
            None => Ok(None),
            Some(key) => keys::seq_of(&key, &key[prefix.len()..]).map(Some),
        }
    }

    fn drop_queued(&mut self, client_id: &MqttStr, seq: MessageSeq) -> Applied {
        if self.session(client_id).is_none_or(|s| s.queued == 0) {
            return Ok(false);
        }
        let key = keys::queued_key(client_id, seq);
        if !self.overlay.contains(&key)? {
            return Ok(false);
        }
        self.overlay.delete(key);
        if let Some(session) = self.session(client_id) {
            session.remove_queued(seq);
        }
        Ok(true)
    }

    fn send(&mut self, client_id: &MqttStr, seq: MessageSeq, id: PacketId) -> Applied {
        match self.session(client_id) {
            Some(s) if s.queued > 0 && !s.inflight.contains_key(&id) => {}
            _ => return Ok(false),
        }
        let key = keys::queued_key(client_id, seq);
        // Taken out (its deletion planned) without a copy; put back if the write is skipped.
        let Some(value) = self.overlay.take(&key)? else {
            return Ok(false);
        };
        let message = match &value {
            Value::Queued(at) => MessageAt::Batch(*at),
            Value::Encoded(bytes) => MessageAt::Read(Box::new(
                encoding::decode_message(bytes)
                    .map_err(|Malformed| corrupt(&key, "a malformed queued message"))?,
            )),
            Value::Inflight(..) => {
                return Err(corrupt(&key, "an inflight entry as a queued message"));
            }
        };
        if message.get(self.batch).qos == QoS::AtMostOnce {
            self.overlay.put(key, value, false);
            return Ok(false);
        }
        if let Some(session) = self.session(client_id) {
            session.remove_queued(seq);
        }
        self.put_inflight(client_id, id, message);
        Ok(true)
    }

    /// `MessageSent`: the message goes straight into its inflight entry; no queued key is
    /// planned (and none is stored: the sequence number is above every queued one).
    fn queue_and_send(
        &mut self,
        client_id: &MqttStr,
        seq: MessageSeq,
        id: PacketId,
        at: usize,
    ) -> Applied {
        let Some(session) = self.index.sessions.get(client_id) else {
            return Ok(false);
        };
        let (last, in_flight) = (session.last_queued, session.inflight.contains_key(&id));
        if in_flight || overlay::message_of(self.batch, at).qos == QoS::AtMostOnce {
            return Ok(false);
        }
        if !self.above_queued(client_id, last, seq)? {
            return Ok(false);
        }
        self.put_inflight(client_id, id, MessageAt::Batch(at));
        Ok(true)
    }

    /// Plans the inflight entry of `message` (QoS 1 or 2), just sent under `id`, which is not
    /// in flight.
    fn put_inflight(&mut self, client_id: &MqttStr, id: PacketId, message: MessageAt) {
        let send = self.index.next_send;
        let (phase, state) = match message.get(self.batch).qos {
            QoS::ExactlyOnce => (Phase::Rec, InflightState::AwaitingPubRec(message)),
            _ => (Phase::Ack, InflightState::AwaitingPubAck(message)),
        };
        // Not in flight: the store holds no entry under the id.
        let planned = self.overlay.put_tracked(
            PlannedAt::default(),
            || keys::inflight_key(client_id, id),
            Value::Inflight(send, state),
            true,
        );
        self.index.next_send += 1;
        if let Some(session) = self.session(client_id) {
            let flight = Flight {
                send,
                phase,
                planned,
            };
            session.inflight.insert(id, flight);
        }
    }

    fn release(&mut self, client_id: &MqttStr, id: PacketId) -> bool {
        let flight = (self.index.sessions.get_mut(client_id)).and_then(|s| s.inflight.get_mut(&id));
        let Some(flight) = flight.filter(|flight| flight.phase == Phase::Rec) else {
            return false;
        };
        flight.phase = Phase::Comp;
        let entry = Value::Inflight(flight.send, InflightState::AwaitingPubComp);
        let key = || keys::inflight_key(client_id, id);
        flight.planned = self.overlay.put_tracked(flight.planned, key, entry, false);
        true
    }

    fn ack(&mut self, client_id: &MqttStr, id: PacketId) -> bool {
        let acked = self.session(client_id).and_then(|s| s.inflight.remove(&id));
        if let Some(flight) = acked {
            (self.overlay).delete_tracked(flight.planned, || keys::inflight_key(client_id, id));
        }
        acked.is_some()
    }

    /// The planned writes, with the records and inbound QoS 2 ids of the sessions whose
    /// record or ids changed.
    fn finish(mut self, writes: &mut Vec<KeyWrite>) {
        for client_id in std::mem::take(&mut self.awaiting_changed) {
            self.write_awaiting(&client_id);
        }
        for (client_id, absent_before) in self.dirty {
            if let Some(session) = self.index.sessions.get(&client_id) {
                let record = encoding::encode_record(&session.record);
                self.overlay.put(
                    keys::session_key(&client_id),
                    Value::Encoded(record),
                    absent_before,
                );
            }
        }
        self.overlay.into_writes(self.batch, writes);
    }
}
