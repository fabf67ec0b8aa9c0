//! Builders of the writes the contract tests commit and of the skip reports they expect, and a
//! record in the format before owners were stored, shared by every storage test module.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use codec::{
    MqttStr, PacketId, ProtocolVersion, QoS, RetainHandling, SubscriptionId, SubscriptionOptions,
};

use super::{
    SessionWrite, Skipped, StoredDelayed, StoredMessage, StoredOwner, StoredSession,
    StoredSubscription,
};
use crate::SessionExpiry;

pub(super) fn text(s: &str) -> MqttStr {
    MqttStr::from_bytes(Bytes::copy_from_slice(s.as_bytes())).unwrap()
}

pub(super) fn pid(n: u16) -> PacketId {
    PacketId::new(n).unwrap()
}

pub(super) fn message(topic: &str, qos: QoS) -> StoredMessage {
    StoredMessage {
        topic: Bytes::copy_from_slice(topic.as_bytes()),
        payload: Bytes::from_static(b"payload"),
        qos,
        retain: false,
        properties: Bytes::new(),
        expires_at: None,
        sub_ids: vec![SubscriptionId::new(7).unwrap()],
        accepted_at: None,
        key: 0,
    }
}

pub(super) fn saved(client: &str, expiry: SessionExpiry) -> SessionWrite {
    saved_by(client, expiry, StoredOwner::Unbound)
}

/// `SessionSaved` for `client`, a 5.0 session of `owner` without a will.
pub(super) fn saved_by(client: &str, expiry: SessionExpiry, owner: StoredOwner) -> SessionWrite {
    SessionWrite::SessionSaved {
        client_id: text(client),
        protocol: ProtocolVersion::V5,
        expiry,
        will: None,
        owner: Box::new(owner),
    }
}

pub(super) fn queued(client: &str, seq: u64, qos: QoS) -> SessionWrite {
    SessionWrite::MessageQueued {
        client_id: text(client),
        seq,
        message: Box::new(message("t", qos)),
    }
}

pub(super) fn sent(client: &str, seq: u64, id: u16) -> SessionWrite {
    SessionWrite::InflightSent {
        client_id: text(client),
        seq,
        packet_id: pid(id),
    }
}

/// `MessageSent` for `client`: a message of `qos` queued as `seq` and sent as `id` at once.
pub(super) fn queued_and_sent(client: &str, seq: u64, id: u16, qos: QoS) -> SessionWrite {
    SessionWrite::MessageSent {
        client_id: text(client),
        seq,
        packet_id: pid(id),
        message: Box::new(message("t", qos)),
    }
}

pub(super) fn subscribed(client: &str, filter: &str, qos: QoS) -> SessionWrite {
    SessionWrite::Subscribed {
        client_id: text(client),
        filter: text(filter),
        options: SubscriptionOptions {
            qos,
            ..SubscriptionOptions::default()
        },
        id: None,
    }
}

/// `InflightReleased` for client "a".
pub(super) fn released(id: u16) -> SessionWrite {
    SessionWrite::InflightReleased {
        client_id: text("a"),
        packet_id: pid(id),
    }
}

/// `InflightAcked` for client "a".
pub(super) fn acked(id: u16) -> SessionWrite {
    SessionWrite::InflightAcked {
        client_id: text("a"),
        packet_id: pid(id),
    }
}

/// `Qos2Received` for client "a".
pub(super) fn qos2_received(id: u16) -> SessionWrite {
    SessionWrite::Qos2Received {
        client_id: text("a"),
        packet_id: pid(id),
    }
}

/// `Qos2Released` for client "a".
pub(super) fn qos2_released(id: u16) -> SessionWrite {
    SessionWrite::Qos2Released {
        client_id: text("a"),
        packet_id: pid(id),
    }
}
/// `RetainSet` for `topic`, with a payload naming it.
pub(super) fn retain_set(topic: &str, payload: &'static str) -> SessionWrite {
    let mut message = message(topic, QoS::AtLeastOnce);
    message.payload = Bytes::from_static(payload.as_bytes());
    message.retain = true;
    SessionWrite::RetainSet {
        topic: text(topic),
        message: Box::new(message),
    }
}

/// `DelayedSet` of `id` for `topic`, due `due_secs` after the epoch, with a payload naming it.
pub(super) fn delayed_set(
    id: u64,
    topic: &str,
    payload: &'static str,
    due_secs: u64,
) -> SessionWrite {
    let mut message = message(topic, QoS::ExactlyOnce);
    message.payload = Bytes::from_static(payload.as_bytes());
    message.sub_ids.clear();
    message.expires_at =
        Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(due_secs + 60));
    SessionWrite::DelayedSet {
        id,
        delayed: Box::new(StoredDelayed {
            due: std::time::UNIX_EPOCH + std::time::Duration::from_secs(due_secs),
            publisher: text("publisher"),
            message,
        }),
    }
}

/// `MessageDropped` for client "a".
pub(super) fn dropped(seq: u64) -> SessionWrite {
    SessionWrite::MessageDropped {
        client_id: text("a"),
        seq,
    }
}

/// The report of a skipped write for client `client`.
pub(super) fn skip(write: &'static str, client: &str) -> Skipped {
    Skipped {
        write,
        client_id: client.to_owned(),
    }
}

/// The record of client "old" as the encoder wrote it before owners were stored (format
/// version 3, ending after the inbound QoS 2 ids): a 5.0 session with expiry 60 s,
/// disconnected at 1,000 s after the epoch, one subscription (`a/#` at QoS 1), no will.
pub(super) fn record_without_owner() -> Vec<u8> {
    let mut bytes = vec![3, 5, 1, 0, 0, 0, 60, 0, 1, 0];
    bytes.extend_from_slice(&1_000u64.to_be_bytes());
    bytes.extend_from_slice(&0u32.to_be_bytes());
    bytes.extend_from_slice(&1u32.to_be_bytes());
    bytes.extend_from_slice(&3u32.to_be_bytes());
    bytes.extend_from_slice(b"a/#");
    bytes.extend_from_slice(&[1, 0, 0, 0, 0]);
    bytes.extend_from_slice(&0u32.to_be_bytes());
    bytes
}

/// The session [`record_without_owner`] holds: its owner not known.
pub(super) fn session_without_owner() -> StoredSession {
    let mut session = StoredSession::new(
        text("old"),
        ProtocolVersion::V5,
        SessionExpiry::After(60),
        None,
    );
    session.disconnected_at = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000));
    session.subscriptions = vec![StoredSubscription {
        filter: text("a/#"),
        options: SubscriptionOptions {
            qos: QoS::AtLeastOnce,
            no_local: false,
            retain_as_published: false,
            retain_handling: RetainHandling::from_u8(0).expect("0 is a retain handling"),
        },
        id: None,
    }];
    session
}
