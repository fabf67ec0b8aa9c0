//! A whole session in one value, to move it to another broker (a node of a cluster taking a
//! client over): its record (as stored, its owner included), then its inbound QoS 2 ids, its
//! queued messages with their sequence numbers and its inflight entries in send order, each in
//! the engines' own encodings. Decoding checks everything, like the engines' values.

use codec::MqttStr;

use super::StoredSession;
use super::encoding::{
    Decoded, Malformed, Reader, Writer, decode_inflight, decode_message, decode_record,
    encode_inflight, encode_message, encode_record, len_u32,
};

/// Why a snapshot does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("session snapshot malformed or of another format version")]
pub struct SnapshotError;

/// `session` in one value.
pub fn encode_session_snapshot(session: &StoredSession) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(session.client_id.as_bytes());
    w.bytes(&encode_record(session));
    w.u32(len_u32(session.awaiting_release.len()));
    for id in &session.awaiting_release {
        w.u32(u32::from(id.get()));
    }
    w.u32(len_u32(session.queued.len()));
    for (seq, message) in &session.queued {
        w.u64(*seq);
        w.bytes(&encode_message(message));
    }
    w.u32(len_u32(session.inflight.len()));
    for (id, state) in &session.inflight {
        w.u32(u32::from(id.get()));
        w.bytes(&encode_inflight(0, &state.as_ref()));
    }
    w.into_inner()
}

/// One queued message in the engines' encoding (to mirror it elsewhere).
pub fn encode_queued_message(message: &super::StoredMessage) -> Vec<u8> {
    encode_message(message)
}

/// A message from [`encode_queued_message`].
pub fn decode_queued_message(value: &[u8]) -> Result<super::StoredMessage, SnapshotError> {
    decode_message(value).map_err(|Malformed| SnapshotError)
}

/// A session from [`encode_session_snapshot`].
pub fn decode_session_snapshot(value: &[u8]) -> Result<StoredSession, SnapshotError> {
    decode(value).map_err(|Malformed| SnapshotError)
}

fn decode(value: &[u8]) -> Decoded<StoredSession> {
    let mut r = Reader::new(value)?;
    let client_id: MqttStr = r.text()?;
    let mut session = decode_record(client_id, &r.bytes()?)?;
    session.awaiting_release = r.vec(packet_id)?;
    session.queued = r.vec(|r| Ok((r.u64()?, decode_message(&r.bytes()?)?)))?;
    session.inflight = r.vec(|r| Ok((packet_id(r)?, decode_inflight(&r.bytes()?)?.1)))?;
    r.finish(session)
}

fn packet_id(r: &mut Reader<'_>) -> Decoded<codec::PacketId> {
    let id = u16::try_from(r.u32()?).map_err(|_| Malformed)?;
    codec::PacketId::new(id).ok_or(Malformed)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use bytes::Bytes;
    use codec::{PacketId, ProtocolVersion, QoS, SubscriptionOptions};

    use super::*;
    use crate::storage::{StoredMessage, StoredOwner, StoredSubscription};
    use crate::{InflightState, SessionExpiry};

    fn message(payload: &'static [u8]) -> StoredMessage {
        StoredMessage {
            topic: Bytes::from_static(b"a/b"),
            payload: Bytes::from_static(payload),
            qos: QoS::AtLeastOnce,
            retain: false,
            properties: Bytes::new(),
            expires_at: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000)),
            sub_ids: Vec::new(),
            accepted_at: None,
            key: 7,
        }
    }

    fn session() -> StoredSession {
        let id = |n| PacketId::new(n).unwrap();
        let mut s = StoredSession::new(
            MqttStr::try_from("client-1").unwrap(),
            ProtocolVersion::V5,
            SessionExpiry::After(300),
            None,
        );
        s.subscriptions = vec![StoredSubscription {
            filter: MqttStr::try_from("a/#").unwrap(),
            options: SubscriptionOptions::default(),
            id: None,
        }];
        s.owner = StoredOwner::User(MqttStr::try_from("alice").unwrap());
        s.awaiting_release = vec![id(7), id(9)];
        s.queued = vec![(11, message(b"q1")), (12, message(b"q2"))];
        s.inflight = vec![
            (id(1), InflightState::AwaitingPubAck(message(b"i1"))),
            (id(2), InflightState::AwaitingPubComp),
        ];
        s
    }

    #[test]
    fn a_session_round_trips() {
        let original = session();
        let back = decode_session_snapshot(&encode_session_snapshot(&original)).unwrap();
        assert_eq!(back, original);
    }

    #[test]
    fn a_cut_or_damaged_snapshot_is_refused() {
        let encoded = encode_session_snapshot(&session());
        for len in 0..encoded.len() {
            assert!(
                decode_session_snapshot(&encoded[..len]).is_err(),
                "cut at {len}"
            );
        }
        let mut extra = encoded.clone();
        extra.push(0);
        assert!(decode_session_snapshot(&extra).is_err());
    }
}
