//! What the durable engines share: the key layout, reading sessions back from keys, and turning
//! a batch into key writes. An engine supplies reads ([`KvRead`]) and applies the resulting
//! [`KeyWrite`]s in one atomic, durable step.
//!
//! # Key layout
//!
//! A key is a tag byte, the client identifier with a two-byte big-endian length prefix (so no
//! identifier is a prefix of another's keys), and a suffix:
//!
//! | key | value |
//! |---|---|
//! | `s` `<len><client id>` | the session record: connection-scoped state, subscriptions (in order), inflight packet ids (in send order), inbound QoS 2 ids |
//! | `q` `<len><client id>` `<seq: u64 BE>` | a queued message (keys sort in queue order) |
//! | `i` `<len><client id>` `<packet id: u16 BE>` | an inflight entry's state and message |
//! | `t` `<topic>` | a retained message (no length prefix: the topic is the rest of the key) |
//!
//! Subscriptions and QoS 2 ids live in the record: they are small and their order matters.
//!
//! # Applying a batch
//!
//! `plan` reads every session the batch names, applies the batch to them with the model
//! engine's own rules ([`super::recording`]), so a durable engine skips exactly what the model
//! skips, and returns the keys that changed. Retained-message writes become key writes as they
//! are. Its cost grows with the stored size of the
//! sessions a batch touches (their queues are read and compared): fine for groundwork, a cached
//! per-session index is the obvious next step once the broker writes through it.

use std::collections::BTreeMap;

use codec::{MqttStr, PacketId};

use super::encoding::{self, Malformed};
use super::recording::apply;
use super::{
    Committed, Recovered, SessionWrite, Skipped, StorageError, StoredMessage, StoredSession,
};
use crate::InflightState;

const SESSION: u8 = b's';
const QUEUED: u8 = b'q';
const INFLIGHT: u8 = b'i';
const RETAINED: u8 = b't';

/// One key to set (`Some`) or delete (`None`).
pub(super) type KeyWrite = (Vec<u8>, Option<Vec<u8>>);

/// Keys and values, in key order.
pub(super) type KeyValues = Vec<(Vec<u8>, Vec<u8>)>;

/// Reads of one engine, inside the transaction (or snapshot) a batch is planned in.
pub(super) trait KvRead {
    /// The value under `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;
    /// Every key and value starting with `prefix`, in key order.
    fn scan(&self, prefix: &[u8]) -> Result<KeyValues, StorageError>;
}

/// `tag`, then the length-prefixed client identifier.
fn prefix(tag: u8, client_id: &MqttStr) -> Vec<u8> {
    let id = client_id.as_bytes();
    let len = u16::try_from(id.len()).expect("invariant: an MQTT string is under 64 KiB");
    let mut key = Vec::with_capacity(3 + id.len() + 8);
    key.push(tag);
    key.extend_from_slice(&len.to_be_bytes());
    key.extend_from_slice(id);
    key
}

/// The key of a session's record.
pub(super) fn session_key(client_id: &MqttStr) -> Vec<u8> {
    prefix(SESSION, client_id)
}

fn queued_key(client_id: &MqttStr, seq: u64) -> Vec<u8> {
    let mut key = prefix(QUEUED, client_id);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

fn inflight_key(client_id: &MqttStr, id: PacketId) -> Vec<u8> {
    let mut key = prefix(INFLIGHT, client_id);
    key.extend_from_slice(&id.get().to_be_bytes());
    key
}

/// The key of a retained message.
fn retained_key(topic: &MqttStr) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + topic.as_bytes().len());
    key.push(RETAINED);
    key.extend_from_slice(topic.as_bytes());
    key
}

/// The error for a value (or key) under `key` that does not decode.
pub(super) fn corrupt(key: &[u8], what: &str) -> StorageError {
    StorageError::Corrupt {
        reason: format!("{what} under key \"{}\"", key.escape_ascii()),
    }
}

/// Every stored session, by client identifier.
pub(super) fn load_all(kv: &impl KvRead) -> Result<Recovered, StorageError> {
    let mut sessions = Vec::new();
    for (key, value) in kv.scan(&[SESSION])? {
        let client_id = client_id_of(&key).ok_or_else(|| corrupt(&key, "a malformed key"))?;
        sessions.push(load_record(kv, client_id, &key, &value)?);
    }
    sessions.sort_by(|a, b| a.client_id.cmp(&b.client_id));
    let retained = load_retained(kv)?;
    Ok(Recovered { sessions, retained })
}

/// Every retained message, by topic.
fn load_retained(kv: &impl KvRead) -> Result<Vec<(MqttStr, StoredMessage)>, StorageError> {
    let mut retained = Vec::new();
    for (key, value) in kv.scan(&[RETAINED])? {
        let topic = MqttStr::from_bytes(bytes::Bytes::copy_from_slice(&key[1..]))
            .map_err(|_| corrupt(&key, "a malformed key"))?;
        let message = encoding::decode_message(&value)
            .map_err(|Malformed| corrupt(&key, "a malformed retained message"))?;
        retained.push((topic, message));
    }
    retained.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(retained)
}

/// The client identifier of a session key.
fn client_id_of(key: &[u8]) -> Option<MqttStr> {
    let len = u16::from_be_bytes(key.get(1..3)?.try_into().ok()?);
    let id = key.get(3..)?;
    if id.len() != usize::from(len) {
        return None;
    }
    MqttStr::from_bytes(bytes::Bytes::copy_from_slice(id)).ok()
}

/// One stored session, if there is one.
fn load_session(
    kv: &impl KvRead,
    client_id: &MqttStr,
) -> Result<Option<StoredSession>, StorageError> {
    let key = session_key(client_id);
    match kv.get(&key)? {
        None => Ok(None),
        Some(value) => load_record(kv, client_id.clone(), &key, &value).map(Some),
    }
}

/// A session from its record, with its queued and inflight messages.
fn load_record(
    kv: &impl KvRead,
    client_id: MqttStr,
    key: &[u8],
    value: &[u8],
) -> Result<StoredSession, StorageError> {
    let (mut session, inflight) = encoding::decode_record(client_id, value)
        .map_err(|Malformed| corrupt(key, "a malformed session record"))?;
    let queued_prefix = prefix(QUEUED, &session.client_id);
    for (key, value) in kv.scan(&queued_prefix)? {
        let seq = key[queued_prefix.len()..]
            .try_into()
            .map(u64::from_be_bytes)
            .map_err(|_| corrupt(&key, "a malformed key"))?;
        let message = encoding::decode_message(&value)
            .map_err(|Malformed| corrupt(&key, "a malformed queued message"))?;
        session.queued.push((seq, message));
    }
    for id in inflight {
        let key = inflight_key(&session.client_id, id);
        let value = kv
            .get(&key)?
            .ok_or_else(|| corrupt(&key, "a missing inflight entry"))?;
        let state = encoding::decode_inflight(&value)
            .map_err(|Malformed| corrupt(&key, "a malformed inflight entry"))?;
        session.inflight.push((id, state));
    }
    Ok(session)
}

/// The key writes that apply `batch`, and the writes skipped because they do not follow the
/// stored state.
pub(super) fn plan(
    kv: &impl KvRead,
    batch: &[SessionWrite],
) -> Result<(Vec<KeyWrite>, Committed), StorageError> {
    let mut before = BTreeMap::new();
    for client_id in batch.iter().filter_map(SessionWrite::client_id) {
        if !before.contains_key(client_id) {
            before.insert(client_id.clone(), load_session(kv, client_id)?);
        }
    }
    let mut after: BTreeMap<MqttStr, StoredSession> = before
        .iter()
        .filter_map(|(id, s)| Some((id.clone(), s.clone()?)))
        .collect();
    let mut writes = Vec::new();
    let mut committed = Committed::default();
    for write in batch {
        match write {
            SessionWrite::RetainSet { topic, message } => {
                writes.push((retained_key(topic), Some(encoding::encode_message(message))));
            }
            SessionWrite::RetainCleared { topic } => writes.push((retained_key(topic), None)),
            _ => {
                if apply(&mut after, write).is_err() {
                    committed.skipped.push(Skipped::of(write));
                }
            }
        }
    }
    for (client_id, old) in &before {
        diff(client_id, old.as_ref(), after.get(client_id), &mut writes);
    }
    Ok((writes, committed))
}

/// A stored value other than the record, for comparing old and new.
#[derive(PartialEq)]
enum Entry<'a> {
    Queued(&'a StoredMessage),
    Inflight(&'a InflightState<StoredMessage>),
}

impl Entry<'_> {
    fn encode(&self) -> Vec<u8> {
        match self {
            Self::Queued(m) => encoding::encode_message(m),
            Self::Inflight(state) => encoding::encode_inflight(state),
        }
    }
}

fn entries(session: Option<&StoredSession>) -> BTreeMap<Vec<u8>, Entry<'_>> {
    let Some(s) = session else {
        return BTreeMap::new();
    };
    let queued =
        (s.queued.iter()).map(|(seq, m)| (queued_key(&s.client_id, *seq), Entry::Queued(m)));
    let inflight = (s.inflight.iter())
        .map(|(id, state)| (inflight_key(&s.client_id, *id), Entry::Inflight(state)));
    queued.chain(inflight).collect()
}

/// The key writes that turn `old` into `new`.
fn diff(
    client_id: &MqttStr,
    old: Option<&StoredSession>,
    new: Option<&StoredSession>,
    writes: &mut Vec<KeyWrite>,
) {
    let old_record = old.map(encoding::encode_record);
    let new_record = new.map(encoding::encode_record);
    if old_record != new_record {
        writes.push((session_key(client_id), new_record));
    }
    let old_entries = entries(old);
    let new_entries = entries(new);
    for key in old_entries.keys() {
        if !new_entries.contains_key(key) {
            writes.push((key.clone(), None));
        }
    }
    for (key, entry) in new_entries {
        if old_entries.get(&key) != Some(&entry) {
            writes.push((key, Some(entry.encode())));
        }
    }
}
