//! The key layout of the durable engines (see the table in [`super`]): building keys and
//! reading client identifiers, sequence numbers and packet ids back out of them.

use bytes::Bytes;
use codec::{MqttStr, PacketId};

use crate::storage::{MessageSeq, StorageError};

/// The tag of a session's record.
pub(in crate::storage) const SESSION: u8 = b's';
/// The tag of a queued message.
pub(in crate::storage) const QUEUED: u8 = b'q';
/// The tag of an inflight entry.
pub(in crate::storage) const INFLIGHT: u8 = b'i';
/// The tag of a retained message.
pub(in crate::storage) const RETAINED: u8 = b't';
/// The tag of a delayed message (`$delayed/`), keyed by its id.
pub(in crate::storage) const DELAYED: u8 = b'd';
/// The tag of an inbound QoS 2 packet id awaiting PUBREL (empty value): the layout before
/// [`AWAITING_IDS`], still read, and deleted when its session's ids are next written.
pub(in crate::storage) const AWAITING: u8 = b'a';
/// The tag of a session's inbound QoS 2 packet ids awaiting PUBREL, all under one key.
pub(in crate::storage) const AWAITING_IDS: u8 = b'p';

/// `tag`, then the length-prefixed client identifier: the prefix of all the session's keys
/// under `tag`.
pub(in crate::storage) fn prefix(tag: u8, client_id: &MqttStr) -> Vec<u8> {
    let id = client_id.as_bytes();
    let len = u16::try_from(id.len()).expect("invariant: an MQTT string is under 64 KiB");
    let mut key = Vec::with_capacity(3 + id.len() + 8);
    key.push(tag);
    key.extend_from_slice(&len.to_be_bytes());
    key.extend_from_slice(id);
    key
}

/// The key of a session's record.
pub(in crate::storage) fn session_key(client_id: &MqttStr) -> Vec<u8> {
    prefix(SESSION, client_id)
}

/// The key of a queued message.
pub(in crate::storage) fn queued_key(client_id: &MqttStr, seq: MessageSeq) -> Vec<u8> {
    let mut key = prefix(QUEUED, client_id);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The key of an inflight entry.
pub(in crate::storage) fn inflight_key(client_id: &MqttStr, id: PacketId) -> Vec<u8> {
    let mut key = prefix(INFLIGHT, client_id);
    key.extend_from_slice(&id.get().to_be_bytes());
    key
}

/// The key of an inbound QoS 2 id awaiting PUBREL.
pub(in crate::storage) fn awaiting_key(client_id: &MqttStr, id: PacketId) -> Vec<u8> {
    let mut key = prefix(AWAITING, client_id);
    key.extend_from_slice(&id.get().to_be_bytes());
    key
}

/// The key of a session's inbound QoS 2 ids awaiting PUBREL.
pub(in crate::storage) fn awaiting_ids_key(client_id: &MqttStr) -> Vec<u8> {
    prefix(AWAITING_IDS, client_id)
}

/// The key of a retained message.
pub(in crate::storage) fn retained_key(topic: &MqttStr) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + topic.as_bytes().len());
    key.push(RETAINED);
    key.extend_from_slice(topic.as_bytes());
    key
}

/// The key of a delayed message.
pub(in crate::storage) fn delayed_key(id: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(9);
    key.push(DELAYED);
    key.extend_from_slice(&id.to_be_bytes());
    key
}

/// The id of a delayed-message key.
pub(in crate::storage) fn delayed_id_of(key: &[u8]) -> Result<u64, StorageError> {
    let bytes: [u8; 8] = (key.get(1..).unwrap_or_default())
        .try_into()
        .map_err(|_| corrupt(key, "a malformed key"))?;
    Ok(u64::from_be_bytes(bytes))
}

/// The error for a value (or key) under `key` that does not decode.
pub(in crate::storage) fn corrupt(key: &[u8], what: &str) -> StorageError {
    StorageError::Corrupt {
        reason: format!("{what} under key \"{}\"", key.escape_ascii()),
    }
}

/// A session key split: the client prefix (tag, length, identifier) and the rest.
pub(in crate::storage) fn split_client(key: &[u8]) -> Result<(&[u8], &[u8]), StorageError> {
    let malformed = || corrupt(key, "a malformed key");
    let len = key.get(1..3).ok_or_else(malformed)?;
    let end = 3 + usize::from(u16::from_be_bytes([len[0], len[1]]));
    if key.len() < end {
        return Err(malformed());
    }
    Ok(key.split_at(end))
}

/// The client identifier of a client prefix (as [`split_client`] returns it).
pub(in crate::storage) fn client_id(key: &[u8], client: &[u8]) -> Result<MqttStr, StorageError> {
    MqttStr::from_bytes(Bytes::copy_from_slice(&client[3..]))
        .map_err(|_| corrupt(key, "a malformed client identifier in the key"))
}

/// The sequence number at the end of a queued-message key.
pub(in crate::storage) fn seq_of(key: &[u8], rest: &[u8]) -> Result<MessageSeq, StorageError> {
    let bytes: [u8; 8] = rest
        .try_into()
        .map_err(|_| corrupt(key, "a malformed key"))?;
    Ok(u64::from_be_bytes(bytes))
}

/// The packet id at the end of an inflight key.
pub(in crate::storage) fn packet_id_of(key: &[u8], rest: &[u8]) -> Result<PacketId, StorageError> {
    let bytes: [u8; 2] = rest
        .try_into()
        .map_err(|_| corrupt(key, "a malformed key"))?;
    PacketId::new(u16::from_be_bytes(bytes)).ok_or_else(|| corrupt(key, "a malformed key"))
}

/// The topic of a retained-message key.
pub(in crate::storage) fn topic_of(key: &[u8]) -> Result<MqttStr, StorageError> {
    MqttStr::from_bytes(Bytes::copy_from_slice(&key[1..]))
        .map_err(|_| corrupt(key, "a malformed key"))
}
