//! The keys of the copies each recovered session's store holds (queued, the part still on disk
//! included, and in flight), for a node of a cluster: its catch-up after a restart leaves out
//! of what it reads back from the replay stream the messages a session holds already
//! (docs/cluster.md, "When a node restarts"). Read once at start-up, before the store thread
//! takes the engine; only the keys are kept (a hash set of 8-byte keys per session), the
//! messages are not.

use std::collections::HashSet;

use codec::MqttStr;
use session_store::InflightState;
use session_store::storage::{
    SessionStorage, StorageError, StoredKeys, StoredMessage, StoredSession,
};

/// Copies read from disk at a time.
const PAGE: usize = 1024;

/// Each session's stored keys (sessions whose copies carry none left out), for `sessions`
/// loaded from `storage` with the in-memory part of their queues and their whole queues'
/// lengths.
pub fn stored_keys(
    storage: &mut dyn SessionStorage,
    sessions: &[(StoredSession, usize)],
) -> Result<StoredKeys, StorageError> {
    let mut all = StoredKeys::new();
    for (session, total) in sessions {
        let mut keys = loaded_keys(session);
        if *total > session.queued.len() {
            let after = session.queued.last().map(|(seq, _)| *seq);
            read_tail_keys(storage, &session.client_id, after, &mut keys)?;
        }
        keys.remove(&0);
        if !keys.is_empty() {
            all.insert(session.client_id.clone(), keys);
        }
    }
    Ok(all)
}

/// The keys of the copies loaded with `session`: its queue's in-memory part and its inflight
/// copies.
fn loaded_keys(session: &StoredSession) -> HashSet<u64> {
    let queued = session.queued.iter().map(|(_, copy)| copy.key);
    let in_flight =
        (session.inflight.iter()).filter_map(|(_, state)| copy_of(state).map(|c| c.key));
    queued.chain(in_flight).collect()
}

fn copy_of(state: &InflightState<StoredMessage>) -> Option<&StoredMessage> {
    match state {
        InflightState::AwaitingPubAck(copy) | InflightState::AwaitingPubRec(copy) => Some(copy),
        InflightState::AwaitingPubComp => None,
    }
}

/// Appends to `keys` those of `client_id`'s queued copies after `after`, read a page at a time.
fn read_tail_keys(
    storage: &mut dyn SessionStorage,
    client_id: &MqttStr,
    mut after: Option<u64>,
    keys: &mut HashSet<u64>,
) -> Result<(), StorageError> {
    loop {
        let page = storage.queued_after(client_id, after, PAGE)?;
        keys.extend(page.iter().map(|(_, copy)| copy.key));
        match page.last() {
            Some((seq, _)) if page.len() == PAGE => after = Some(*seq),
            _ => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use codec::{PacketId, ProtocolVersion, QoS};
    use session_store::SessionExpiry;
    use session_store::storage::{RedbStorage, SessionWrite, SyncMode};

    fn copy(key: u64) -> StoredMessage {
        StoredMessage {
            topic: Bytes::from_static(b"t"),
            payload: Bytes::from_static(b"p"),
            qos: QoS::ExactlyOnce,
            retain: false,
            properties: Bytes::new(),
            expires_at: None,
            sub_ids: Vec::new(),
            accepted_at: None,
            key,
        }
    }

    #[test]
    fn every_queued_copy_on_disk_and_every_inflight_copy_gives_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut storage = RedbStorage::open(dir.path(), SyncMode::EveryCommit).unwrap();
        let client_id = MqttStr::try_from("c").unwrap();
        let mut writes = vec![SessionWrite::SessionSaved {
            client_id: client_id.clone(),
            protocol: ProtocolVersion::V5,
            expiry: SessionExpiry::Never,
            will: None,
            owner: Box::new(session_store::storage::StoredOwner::Unbound),
        }];
        // Three pages and a bit, one copy without a key (stored by an earlier version).
        let count = 3 * PAGE as u64 + 5;
        for seq in 1..=count {
            writes.push(SessionWrite::MessageQueued {
                client_id: client_id.clone(),
                seq,
                message: Box::new(copy(if seq == 7 { 0 } else { 100 + seq })),
            });
        }
        storage.commit(&writes).unwrap();
        let paged = storage.load_paged(2).unwrap();
        let mut session = paged.recovered.sessions.into_iter().next().unwrap();
        let id = PacketId::new(9).unwrap();
        session.inflight = vec![(id, InflightState::AwaitingPubRec(copy(42)))];
        let keys = stored_keys(&mut storage, &[(session, paged.queued_totals[0])]).unwrap();
        let mut expected: HashSet<u64> = (1..=count).filter(|&s| s != 7).map(|s| 100 + s).collect();
        expected.insert(42);
        assert_eq!(keys[&client_id], expected);
    }
}
