//! The contract of [`SessionStorage`] as generic test bodies: every engine runs them (through
//! `engine_tests.rs`), each with a factory for a fresh, empty storage.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use codec::{MqttStr, PacketId, ProtocolVersion, QoS, SubscriptionId, SubscriptionOptions, Will};

use super::*;
use crate::storage::{StoredMessage, StoredSubscription};
use crate::{InflightState, PendingWill, SessionExpiry};

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
    }
}

pub(super) fn saved(client: &str, expiry: SessionExpiry) -> SessionWrite {
    SessionWrite::SessionSaved {
        client_id: text(client),
        protocol: ProtocolVersion::V5,
        expiry,
        will: None,
    }
}

pub(super) fn queued(client: &str, seq: u64, qos: QoS) -> SessionWrite {
    SessionWrite::MessageQueued {
        client_id: text(client),
        seq,
        message: message("t", qos),
    }
}

pub(super) fn sent(client: &str, seq: u64, id: u16) -> SessionWrite {
    SessionWrite::InflightSent {
        client_id: text(client),
        seq,
        packet_id: pid(id),
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
pub(super) fn a_sequence_of_writes_loads_as_the_sessions_it_describes<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let mut storage = make();
    let closed = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
    let will = PendingWill {
        will: Will {
            topic: text("last/words"),
            payload: Bytes::from_static(b"bye"),
            qos: QoS::AtLeastOnce,
            retain: false,
            properties: Default::default(),
        },
        delay: Duration::from_secs(5),
    };
    storage
        .commit(&[
            saved("b", SessionExpiry::Never),
            saved("a", SessionExpiry::After(60)),
            subscribed("a", "x/+", QoS::AtMostOnce),
            subscribed("a", "y/#", QoS::AtLeastOnce),
            subscribed("a", "x/+", QoS::ExactlyOnce),
        ])
        .unwrap();
    storage
        .commit(&[
            queued("a", 1, QoS::AtLeastOnce),
            queued("a", 2, QoS::ExactlyOnce),
            queued("a", 3, QoS::AtLeastOnce),
            queued("a", 4, QoS::AtLeastOnce),
            sent("a", 1, 10),
            sent("a", 2, 11),
            released(11),
            SessionWrite::MessageDropped {
                client_id: text("a"),
                seq: 3,
            },
            qos2_received(5),
            qos2_received(6),
            qos2_released(5),
            SessionWrite::Unsubscribed {
                client_id: text("a"),
                filter: text("y/#"),
            },
            SessionWrite::SessionSaved {
                client_id: text("b"),
                protocol: ProtocolVersion::V3_1_1,
                expiry: SessionExpiry::After(30),
                will: Some(will.clone()),
            },
            SessionWrite::SessionDisconnected {
                client_id: text("b"),
                at: closed,
            },
        ])
        .unwrap();

    let mut a = StoredSession::new(
        text("a"),
        ProtocolVersion::V5,
        SessionExpiry::After(60),
        None,
    );
    a.subscriptions = vec![StoredSubscription {
        filter: text("x/+"),
        options: SubscriptionOptions {
            qos: QoS::ExactlyOnce,
            ..SubscriptionOptions::default()
        },
        id: None,
    }];
    a.queued = vec![(4, message("t", QoS::AtLeastOnce))];
    a.inflight = vec![
        (
            pid(10),
            InflightState::AwaitingPubAck(message("t", QoS::AtLeastOnce)),
        ),
        (pid(11), InflightState::AwaitingPubComp),
    ];
    a.awaiting_release = vec![pid(6)];
    let mut b = StoredSession::new(
        text("b"),
        ProtocolVersion::V3_1_1,
        SessionExpiry::After(30),
        Some(will),
    );
    b.disconnected_at = Some(closed);
    assert_eq!(
        storage.load().unwrap(),
        Recovered {
            sessions: vec![a, b]
        }
    );
}

pub(super) fn acknowledged_and_removed_state_is_gone<S: SessionStorage>(make: impl Fn() -> S) {
    let mut storage = make();
    storage
        .commit(&[
            saved("a", SessionExpiry::Never),
            queued("a", 1, QoS::AtLeastOnce),
            queued("a", 2, QoS::ExactlyOnce),
            sent("a", 1, 1),
            sent("a", 2, 2),
            acked(1),
            released(2),
            acked(2),
            saved("gone", SessionExpiry::Never),
            subscribed("gone", "t", QoS::AtLeastOnce),
            SessionWrite::SessionRemoved {
                client_id: text("gone"),
            },
        ])
        .unwrap();
    let loaded = storage.load().unwrap();
    let expected = StoredSession::new(text("a"), ProtocolVersion::V5, SessionExpiry::Never, None);
    assert_eq!(loaded.sessions, vec![expected]);
}

pub(super) fn a_batch_is_applied_whole_or_not_at_all<S: SessionStorage>(make: impl Fn() -> S) {
    let mut storage = make();
    storage.commit(&[saved("a", SessionExpiry::Never)]).unwrap();
    let before = storage.load().unwrap();
    let error = storage
        .commit(&[subscribed("a", "t", QoS::AtLeastOnce), acked(9)])
        .unwrap_err();
    assert!(matches!(
        error,
        StorageError::Inconsistent {
            write: "InflightAcked",
            ..
        }
    ));
    assert_eq!(storage.load().unwrap(), before);
}

pub(super) fn writes_that_do_not_follow_the_stored_state_are_refused<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let refused = [
        vec![subscribed("nobody", "t", QoS::AtMostOnce)],
        vec![saved("a", SessionExpiry::Never), sent("a", 1, 1)],
        vec![
            saved("a", SessionExpiry::Never),
            queued("a", 2, QoS::AtLeastOnce),
            queued("a", 2, QoS::AtLeastOnce),
        ],
        vec![
            saved("a", SessionExpiry::Never),
            queued("a", 1, QoS::AtMostOnce),
            sent("a", 1, 1),
        ],
        vec![
            saved("a", SessionExpiry::Never),
            queued("a", 1, QoS::AtLeastOnce),
            sent("a", 1, 1),
            released(1),
        ],
        vec![saved("a", SessionExpiry::Never), qos2_released(1)],
        vec![
            saved("a", SessionExpiry::Never),
            SessionWrite::Unsubscribed {
                client_id: text("a"),
                filter: text("t"),
            },
        ],
    ];
    for batch in refused {
        let mut storage = make();
        assert!(storage.commit(&batch).is_err(), "{batch:?}");
        assert_eq!(storage.load().unwrap(), Recovered::default());
    }
}
