//! Reading the store back: every session and retained message (building the [`Index`] on the
//! way), and a session's queue from a sequence number on.

use std::collections::HashMap;

use codec::{MqttStr, PacketId};

use super::index::{Flight, Index, Indexed, LastQueued, Phase};
use super::keys::{
    self, AWAITING, AWAITING_IDS, DELAYED, INFLIGHT, QUEUED, RETAINED, SESSION, corrupt,
};
use super::kv::KvRead;
use crate::InflightState;
use crate::storage::StoredSession;
use crate::storage::encoding::{self, Malformed};
use crate::storage::{
    MessageSeq, PagedRecovered, Recovered, StorageError, StoredDelayed, StoredMessage,
};

/// A session being loaded.
struct Loading {
    session: StoredSession,
    indexed: Indexed,
    inflight: Vec<(u64, PacketId, InflightState<StoredMessage>)>,
}

/// Sessions being loaded, by the length-prefixed client identifier of their keys.
type ByClient = HashMap<Vec<u8>, Loading, foldhash::fast::RandomState>;

/// Every stored session (each queue cut to its first `queued` messages) and retained message,
/// and the index of what is stored.
pub(in crate::storage) fn load_all(
    kv: &impl KvRead,
    queued: usize,
) -> Result<(PagedRecovered, Index), StorageError> {
    let mut index = Index::default();
    let mut loading = load_records(kv)?;
    load_queues(kv, &mut loading, queued)?;
    load_inflight(kv, &mut loading, &mut index)?;
    load_awaiting(kv, &mut loading)?;
    let mut sessions: Vec<Loading> = loading.into_values().collect();
    sessions.sort_by(|a, b| a.session.client_id.cmp(&b.session.client_id));
    let mut recovered = Recovered {
        sessions: Vec::with_capacity(sessions.len()),
        retained: load_retained(kv)?,
        delayed: load_delayed(kv)?,
    };
    let mut queued_totals = Vec::with_capacity(sessions.len());
    let mut max_queued_seq = 0;
    for Loading {
        mut session,
        indexed,
        mut inflight,
    } in sessions
    {
        inflight.sort_by_key(|(send, _, _)| *send);
        session.inflight = (inflight.into_iter())
            .map(|(_, id, state)| (id, state))
            .collect();
        queued_totals.push(usize::try_from(indexed.queued).unwrap_or(usize::MAX));
        if let LastQueued::Seq(seq) = indexed.last_queued {
            max_queued_seq = max_queued_seq.max(seq);
        }
        index.sessions.insert(session.client_id.clone(), indexed);
        recovered.sessions.push(session);
    }
    let paged = PagedRecovered {
        recovered,
        queued_totals,
        max_queued_seq,
    };
    Ok((paged, index))
}

fn load_records(kv: &impl KvRead) -> Result<ByClient, StorageError> {
    let mut loading = ByClient::default();
    kv.scan(&[SESSION], &[SESSION], &mut |key, value| {
        let (client, rest) = keys::split_client(key)?;
        if !rest.is_empty() {
            return Err(corrupt(key, "a malformed key"));
        }
        let client_id = keys::client_id(key, client)?;
        let session = encoding::decode_record(client_id, value)
            .map_err(|Malformed| corrupt(key, "a malformed session record"))?;
        let indexed = Indexed::new(session.clone());
        let inflight = Vec::new();
        let entry = Loading {
            session,
            indexed,
            inflight,
        };
        loading.insert(client[1..].to_vec(), entry);
        Ok(true)
    })?;
    Ok(loading)
}

/// The session a queued or inflight key belongs to, and the rest of the key.
fn owner<'a, 'k>(
    loading: &'a mut ByClient,
    key: &'k [u8],
) -> Result<(&'a mut Loading, &'k [u8]), StorageError> {
    let (client, rest) = keys::split_client(key)?;
    let owner = (loading.get_mut(&client[1..]))
        .ok_or_else(|| corrupt(key, "an entry of no stored session"))?;
    Ok((owner, rest))
}

fn load_queues(
    kv: &impl KvRead,
    loading: &mut ByClient,
    queued: usize,
) -> Result<(), StorageError> {
    kv.scan(&[QUEUED], &[QUEUED], &mut |key, value| {
        let (owner, rest) = owner(loading, key)?;
        let seq = keys::seq_of(key, rest)?;
        owner.indexed.push_queued(seq);
        if owner.session.queued.len() < queued {
            let message = encoding::decode_message(value)
                .map_err(|Malformed| corrupt(key, "a malformed queued message"))?;
            owner.session.queued.push((seq, message));
        }
        Ok(true)
    })
}

/// Inbound QoS 2 ids awaiting PUBREL, into the record (and the index's copy of it): each
/// session's under its one key, and any under keys of the older layout (one per id).
fn load_awaiting(kv: &impl KvRead, loading: &mut ByClient) -> Result<(), StorageError> {
    kv.scan(&[AWAITING_IDS], &[AWAITING_IDS], &mut |key, value| {
        let (owner, rest) = owner(loading, key)?;
        if !rest.is_empty() {
            return Err(corrupt(key, "a malformed key"));
        }
        let ids = encoding::decode_awaiting_ids(value)
            .map_err(|Malformed| corrupt(key, "malformed inbound QoS 2 ids"))?;
        owner.session.awaiting_release.extend_from_slice(&ids);
        owner.indexed.record.awaiting_release.extend(ids);
        owner.indexed.awaiting_stored = true;
        Ok(true)
    })?;
    kv.scan(&[AWAITING], &[AWAITING], &mut |key, _| {
        let (owner, rest) = owner(loading, key)?;
        let id = keys::packet_id_of(key, rest)?;
        owner.session.awaiting_release.push(id);
        owner.indexed.record.awaiting_release.push(id);
        owner.indexed.legacy_awaiting.push(id);
        Ok(true)
    })?;
    // In id order, as the older layout's keys gave them.
    for owner in loading.values_mut() {
        owner.session.awaiting_release.sort_unstable();
        owner.indexed.record.awaiting_release.sort_unstable();
    }
    Ok(())
}

fn load_inflight(
    kv: &impl KvRead,
    loading: &mut ByClient,
    index: &mut Index,
) -> Result<(), StorageError> {
    kv.scan(&[INFLIGHT], &[INFLIGHT], &mut |key, value| {
        let (owner, rest) = owner(loading, key)?;
        let id = keys::packet_id_of(key, rest)?;
        let (send, state) = encoding::decode_inflight(value)
            .map_err(|Malformed| corrupt(key, "a malformed inflight entry"))?;
        let phase = match &state {
            InflightState::AwaitingPubAck(_) => Phase::Ack,
            InflightState::AwaitingPubRec(_) => Phase::Rec,
            InflightState::AwaitingPubComp => Phase::Comp,
        };
        let planned = Default::default();
        (owner.indexed.inflight).insert(
            id,
            Flight {
                send,
                phase,
                planned,
            },
        );
        owner.inflight.push((send, id, state));
        index.next_send = index.next_send.max(send.saturating_add(1));
        Ok(true)
    })
}

fn load_retained(kv: &impl KvRead) -> Result<Vec<(MqttStr, StoredMessage)>, StorageError> {
    let mut retained = Vec::new();
    kv.scan(&[RETAINED], &[RETAINED], &mut |key, value| {
        let message = encoding::decode_message(value)
            .map_err(|Malformed| corrupt(key, "a malformed retained message"))?;
        retained.push((keys::topic_of(key)?, message));
        Ok(true)
    })?;
    Ok(retained)
}

fn load_delayed(kv: &impl KvRead) -> Result<Vec<(u64, StoredDelayed)>, StorageError> {
    let mut delayed = Vec::new();
    kv.scan(&[DELAYED], &[DELAYED], &mut |key, value| {
        let message = encoding::decode_delayed(value)
            .map_err(|Malformed| corrupt(key, "a malformed delayed message"))?;
        delayed.push((keys::delayed_id_of(key)?, message));
        Ok(true)
    })?;
    Ok(delayed)
}

/// Up to `limit` queued messages of `client_id` with a sequence number above `after`.
pub(in crate::storage) fn queued_after(
    kv: &impl KvRead,
    client_id: &MqttStr,
    after: Option<MessageSeq>,
    limit: usize,
) -> Result<Vec<(MessageSeq, StoredMessage)>, StorageError> {
    let first = match after {
        None => 0,
        Some(seq) => match seq.checked_add(1) {
            Some(first) => first,
            None => return Ok(Vec::new()),
        },
    };
    let mut found = Vec::new();
    if limit == 0 {
        return Ok(found);
    }
    let prefix = keys::prefix(QUEUED, client_id);
    kv.scan(
        &keys::queued_key(client_id, first),
        &prefix,
        &mut |key, value| {
            let seq = keys::seq_of(key, &key[prefix.len()..])?;
            let message = encoding::decode_message(value)
                .map_err(|Malformed| corrupt(key, "a malformed queued message"))?;
            found.push((seq, message));
            Ok(found.len() < limit)
        },
    )?;
    Ok(found)
}
