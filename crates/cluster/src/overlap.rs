//! What the replay stream gives back for a session rebuilt from the mirror that its snapshot
//! holds already (docs/cluster.md, "When a node dies"). A connected session's snapshot holds
//! messages while the backlog it came back to is not all acknowledged (`shard/mirror.rs`), and
//! the read for it starts before the dead node's last heartbeat: a message can be in both.
//! Each is kept once, where it keeps its place with the client: in flight under the packet id
//! the dead node sent it with (a client that has it does not deliver it again), else the
//! stream's copy, which the delivery journal then places (`journal_read.rs`).

use std::collections::HashSet;

use session_store::storage::{StoredMessage, StoredSession};

/// Leaves out of `copies` (read back for `session`, with their keys; 0: none) those whose
/// message the snapshot has in flight, and out of the snapshot's queue those `copies` hold;
/// how many in all.
pub(super) fn leave_out_overlap(
    session: &mut StoredSession,
    copies: &mut Vec<(u64, StoredMessage)>,
) -> usize {
    let in_flight: HashSet<u64> = (session.inflight.iter())
        .filter_map(|(_, state)| state.message())
        .map(|message| message.key)
        .filter(|&key| key != 0)
        .collect();
    let before = copies.len() + session.queued.len();
    copies.retain(|(key, _)| !in_flight.contains(key));
    let read: HashSet<u64> = copies
        .iter()
        .map(|(key, _)| *key)
        .filter(|&key| key != 0)
        .collect();
    session
        .queued
        .retain(|(_, message)| !read.contains(&message.key));
    before - copies.len() - session.queued.len()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use codec::{MqttStr, PacketId, ProtocolVersion, QoS};
    use session_store::{InflightState, SessionExpiry};

    use super::*;

    fn message(payload: &'static str, key: u64) -> StoredMessage {
        StoredMessage {
            topic: Bytes::from_static(b"t"),
            payload: Bytes::from_static(payload.as_bytes()),
            qos: QoS::AtLeastOnce,
            retain: false,
            properties: Bytes::new(),
            expires_at: None,
            sub_ids: Vec::new(),
            accepted_at: None,
            key,
        }
    }

    fn session() -> StoredSession {
        let client_id = MqttStr::try_from("c").unwrap();
        StoredSession::new(client_id, ProtocolVersion::V5, SessionExpiry::Never, None)
    }

    fn payload(message: &StoredMessage) -> &[u8] {
        &message.payload
    }

    #[test]
    fn a_message_in_both_is_kept_once_in_flight_or_as_read() {
        let mut session = session();
        let id = PacketId::new(7).unwrap();
        session.inflight = vec![(id, InflightState::AwaitingPubAck(message("sent", 1)))];
        session.queued = vec![
            (1, message("old", 2)),
            (2, message("queued and read", 3)),
            (3, message("no key", 0)),
        ];
        let mut copies = vec![
            (1, message("sent", 1)),
            (3, message("queued and read", 3)),
            (4, message("new", 4)),
            (0, message("read, no key", 0)),
        ];
        assert_eq!(leave_out_overlap(&mut session, &mut copies), 2);
        let queued: Vec<&[u8]> = session.queued.iter().map(|(_, m)| payload(m)).collect();
        assert_eq!(queued, [&b"old"[..], b"no key"]);
        let read: Vec<&[u8]> = copies.iter().map(|(_, m)| payload(m)).collect();
        assert_eq!(read, [&b"queued and read"[..], b"new", b"read, no key"]);
        assert_eq!(
            session.inflight.len(),
            1,
            "the snapshot's in-flight entry stays"
        );
    }

    #[test]
    fn a_copy_mirrored_twice_is_appended_once() {
        let mut session = session();
        let id = PacketId::new(7).unwrap();
        session.inflight = vec![(id, InflightState::AwaitingPubRec(message("sent", 1)))];
        session.queued = vec![(4, message("queued", 2)), (5, message("no key", 0))];
        let copies = [
            message("sent", 1),
            message("queued", 2),
            message("new", 3),
            message("new", 3),
            message("no key", 0),
        ];
        let left_out = crate::mirror::append_to_queue(&mut session, copies);
        assert_eq!(left_out, 3);
        let queued: Vec<(u64, &[u8])> = (session.queued.iter())
            .map(|(seq, m)| (*seq, payload(m)))
            .collect();
        let expected: [(u64, &[u8]); 4] =
            [(4, b"queued"), (5, b"no key"), (6, b"new"), (7, b"no key")];
        assert_eq!(queued, expected);
    }
}
