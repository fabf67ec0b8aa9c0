//! The contract of [`SessionStorage`] as generic test bodies: every engine runs them (through
//! `engine_tests.rs`), each with a factory for a fresh, empty storage.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use codec::{ProtocolVersion, QoS, SubscriptionOptions, Will};

use super::contract_writes::{
    acked, delayed_set, dropped, message, pid, qos2_received, qos2_released, queued,
    queued_and_sent, released, retain_set, saved, saved_by, sent, skip, subscribed, text,
};
use super::*;
use crate::storage::{StoredMessage, StoredSubscription};
use crate::{InflightState, PendingWill, SessionExpiry};

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
                will: Some(Box::new(will.clone())),
                owner: Box::new(StoredOwner::User(text("bob"))),
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
    b.owner = StoredOwner::User(text("bob"));
    b.disconnected_at = Some(closed);
    assert_eq!(
        storage.load().unwrap(),
        Recovered {
            sessions: vec![a, b],
            retained: Vec::new(),
            delayed: Vec::new(),
        }
    );
}

/// The owners of `storage`'s sessions, by client identifier.
pub(super) fn owners_of<S: SessionStorage>(storage: &mut S) -> Vec<(String, StoredOwner)> {
    let loaded = storage.load().unwrap();
    (loaded.sessions.into_iter())
        .map(|session| (session.client_id.as_str().to_owned(), session.owner))
        .collect()
}

/// `SessionSaved` of three sessions: alice's, an anonymous client's and carol's.
pub(super) fn sessions_of_every_owner() -> [SessionWrite; 3] {
    [
        saved_by("a", SessionExpiry::Never, StoredOwner::User(text("alice"))),
        saved_by("b", SessionExpiry::After(60), StoredOwner::Anonymous),
        saved_by("c", SessionExpiry::Never, StoredOwner::User(text("carol"))),
    ]
}

/// What `load` gives for the sessions of [`sessions_of_every_owner`] after `c` was saved again
/// by dave (a clean start by another identity, where the broker allows it).
pub(super) fn owners_saved_and_replaced() -> Vec<(String, StoredOwner)> {
    vec![
        ("a".to_owned(), StoredOwner::User(text("alice"))),
        ("b".to_owned(), StoredOwner::Anonymous),
        ("c".to_owned(), StoredOwner::User(text("dave"))),
    ]
}

/// A session's owner is stored with it; each `SessionSaved` replaces it, and writes of other
/// kinds leave it.
pub(super) fn the_owner_is_stored_with_the_session_and_replaced_by_each_save<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let mut storage = make();
    storage.commit(&sessions_of_every_owner()).unwrap();
    storage
        .commit(&[
            subscribed("a", "x/+", QoS::AtLeastOnce),
            SessionWrite::SessionDisconnected {
                client_id: text("a"),
                at: SystemTime::UNIX_EPOCH,
            },
            saved_by("c", SessionExpiry::Never, StoredOwner::User(text("dave"))),
        ])
        .unwrap();
    assert_eq!(owners_of(&mut storage), owners_saved_and_replaced());
}

pub(super) fn acknowledged_and_removed_state_is_gone<S: SessionStorage>(make: impl Fn() -> S) {
    let mut storage = make();
    let committed = storage
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
    assert_eq!(committed, Committed::default());
    let loaded = storage.load().unwrap();
    let expected = StoredSession::new(text("a"), ProtocolVersion::V5, SessionExpiry::Never, None);
    assert_eq!(loaded.sessions, vec![expected]);
}

/// `MessageSent` stores what `MessageQueued` and then `InflightSent` store, whether the queue
/// was empty or held older messages, in one batch or across batches, and the flow goes on
/// from it (released, acknowledged) as from a sent queued message.
pub(super) fn a_message_queued_and_sent_at_once_is_stored_as_sent<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let start = [
        saved("a", SessionExpiry::Never),
        queued("a", 1, QoS::AtLeastOnce),
    ];
    let split = [
        queued("a", 2, QoS::ExactlyOnce),
        sent("a", 2, 7),
        queued("a", 3, QoS::AtLeastOnce),
        sent("a", 3, 8),
    ];
    let merged = [
        queued_and_sent("a", 2, 7, QoS::ExactlyOnce),
        queued_and_sent("a", 3, 8, QoS::AtLeastOnce),
    ];
    let after = [released(7), acked(8), queued("a", 4, QoS::AtLeastOnce)];
    let mut expected = make();
    expected.commit(&start).unwrap();
    expected.commit(&split).unwrap();
    let mut storage = make();
    storage.commit(&start).unwrap();
    assert_eq!(storage.commit(&merged).unwrap(), Committed::default());
    assert_eq!(storage.load().unwrap(), expected.load().unwrap());
    for engine in [&mut storage, &mut expected] {
        assert_eq!(engine.commit(&after).unwrap(), Committed::default());
    }
    assert_eq!(storage.load().unwrap(), expected.load().unwrap());
    let mut one_batch = make();
    let all: Vec<SessionWrite> = [&start[..], &merged, &after].concat();
    assert_eq!(one_batch.commit(&all).unwrap(), Committed::default());
    assert_eq!(one_batch.load().unwrap(), expected.load().unwrap());
}

/// A packet id acknowledged and used again in the same batch, and a flow sent, released and
/// completed in one batch, store what they add up to, whether the earlier steps were committed
/// in earlier batches or in the same one.
pub(super) fn a_packet_id_used_again_in_one_batch_keeps_its_new_flow<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let first = [
        saved("a", SessionExpiry::Never),
        queued_and_sent("a", 1, 7, QoS::ExactlyOnce),
        queued_and_sent("a", 2, 8, QoS::ExactlyOnce),
    ];
    let second = [
        released(7),
        acked(8),
        queued_and_sent("a", 3, 8, QoS::AtLeastOnce),
    ];
    let third = [
        acked(7),
        queued_and_sent("a", 4, 7, QoS::ExactlyOnce),
        released(7),
        acked(7),
        queued_and_sent("a", 5, 9, QoS::ExactlyOnce),
        released(9),
    ];
    let mut batched = make();
    let mut whole = make();
    for batch in [&first[..], &second, &third] {
        assert_eq!(batched.commit(batch).unwrap(), Committed::default());
    }
    let all: Vec<SessionWrite> = [&first[..], &second, &third].concat();
    assert_eq!(whole.commit(&all).unwrap(), Committed::default());
    let session = &batched.load().unwrap().sessions[0];
    let ids: Vec<u16> = session.inflight.iter().map(|(id, _)| id.get()).collect();
    assert_eq!(
        ids,
        [8, 9],
        "7 completed twice; 8 carries message 3; 9 released"
    );
    assert!(matches!(
        session.inflight[0].1,
        InflightState::AwaitingPubAck(_)
    ));
    assert_eq!(session.inflight[1].1, InflightState::AwaitingPubComp);
    assert_eq!(whole.load().unwrap(), batched.load().unwrap());
}

pub(super) fn retained_messages_are_set_replaced_and_cleared<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let mut storage = make();
    let committed = storage
        .commit(&[
            retain_set("b/x", "1"),
            retain_set("a", "2"),
            retain_set("c", "3"),
            SessionWrite::RetainCleared { topic: text("c") },
            SessionWrite::RetainCleared {
                topic: text("never/set"),
            },
        ])
        .unwrap();
    assert_eq!(committed, Committed::default());
    storage.commit(&[retain_set("b/x", "4"), acked(1)]).unwrap();
    let expected: Vec<_> = [retain_set("a", "2"), retain_set("b/x", "4")]
        .into_iter()
        .map(|write| match write {
            SessionWrite::RetainSet { topic, message } => (topic, *message),
            _ => unreachable!(),
        })
        .collect();
    let loaded = storage.load().unwrap();
    assert_eq!(loaded.retained, expected);
    assert!(loaded.sessions.is_empty());
}

pub(super) fn retained_messages_and_sessions_do_not_mix<S: SessionStorage>(make: impl Fn() -> S) {
    let mut storage = make();
    storage
        .commit(&[
            saved("t", SessionExpiry::Never),
            retain_set("t", "1"),
            SessionWrite::SessionRemoved {
                client_id: text("t"),
            },
            saved("s", SessionExpiry::Never),
        ])
        .unwrap();
    storage
        .commit(&[SessionWrite::RetainCleared { topic: text("s") }])
        .unwrap();
    let loaded = storage.load().unwrap();
    assert_eq!(loaded.retained.len(), 1);
    assert_eq!(loaded.sessions.len(), 1);
}

pub(super) fn delayed_messages_are_set_replaced_cleared_and_loaded_by_id<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let mut storage = make();
    let far = u64::MAX - 1;
    let committed = storage
        .commit(&[
            delayed_set(far, "z", "far", 3_000_000_000),
            delayed_set(7, "a/b", "1", 100),
            delayed_set(3, "c", "2", 50),
            retain_set("c", "retained"),
            SessionWrite::DelayedCleared { id: 3 },
            SessionWrite::DelayedCleared { id: 99 },
            saved("s", SessionExpiry::Never),
        ])
        .unwrap();
    assert_eq!(committed, Committed::default(), "never skipped");
    storage
        .commit(&[
            delayed_set(7, "a/b", "replaced", 200),
            delayed_set(1, "d", "3", 10),
        ])
        .unwrap();
    let expected: Vec<_> = [
        delayed_set(1, "d", "3", 10),
        delayed_set(7, "a/b", "replaced", 200),
        delayed_set(far, "z", "far", 3_000_000_000),
    ]
    .into_iter()
    .map(|write| match write {
        SessionWrite::DelayedSet { id, delayed } => (id, *delayed),
        _ => unreachable!(),
    })
    .collect();
    let loaded = storage.load().unwrap();
    assert_eq!(loaded.delayed, expected);
    assert_eq!((loaded.retained.len(), loaded.sessions.len()), (1, 1));
    storage
        .commit(&[
            SessionWrite::SessionRemoved {
                client_id: text("s"),
            },
            SessionWrite::RetainCleared { topic: text("c") },
        ])
        .unwrap();
    assert_eq!(
        storage.load().unwrap().delayed,
        expected,
        "sessions and retained apart"
    );
}

/// The sequence numbers of `messages`.
fn seqs(messages: &[(u64, StoredMessage)]) -> Vec<u64> {
    messages.iter().map(|(seq, _)| *seq).collect()
}

pub(super) fn a_queue_is_read_in_pages<S: SessionStorage>(make: impl Fn() -> S) {
    let mut storage = make();
    let mut batch = vec![
        saved("a", SessionExpiry::Never),
        saved("b", SessionExpiry::Never),
    ];
    batch.extend((1..=10).map(|seq| queued("a", seq * 10, QoS::AtLeastOnce)));
    batch.extend([
        sent("a", 10, 1),
        dropped(50),
        queued("b", 7, QoS::ExactlyOnce),
    ]);
    storage.commit(&batch).unwrap();
    let a = text("a");
    let page =
        |storage: &mut S, after, limit| seqs(&storage.queued_after(&a, after, limit).unwrap());
    assert_eq!(page(&mut storage, None, 3), [20, 30, 40]);
    assert_eq!(page(&mut storage, Some(40), 3), [60, 70, 80]);
    assert_eq!(page(&mut storage, Some(41), 100), [60, 70, 80, 90, 100]);
    assert_eq!(page(&mut storage, Some(100), 3), Vec::<u64>::new());
    assert_eq!(page(&mut storage, Some(u64::MAX), 3), Vec::<u64>::new());
    assert_eq!(page(&mut storage, None, 0), Vec::<u64>::new());
    let nobody = storage.queued_after(&text("nobody"), None, 3).unwrap();
    assert!(nobody.is_empty());

    let full = storage.load().unwrap();
    let paged = storage.load_paged(2).unwrap();
    assert_eq!(paged.queued_totals, [8, 1]);
    assert_eq!(seqs(&paged.recovered.sessions[0].queued), [20, 30]);
    assert_eq!(seqs(&paged.recovered.sessions[1].queued), [7]);
    let mut cut = full.clone();
    cut.sessions[0].queued.truncate(2);
    assert_eq!(paged.recovered, cut);
    assert_eq!(storage.load_paged(usize::MAX).unwrap().recovered, full);
    // Loading a page is a load: commits go on from it.
    storage
        .commit(&[sent("a", 20, 2), queued("a", 101, QoS::AtLeastOnce)])
        .unwrap();
    assert_eq!(page(&mut storage, Some(80), 10), [90, 100, 101]);
}

pub(super) fn a_sequence_number_may_come_again_once_the_queue_is_empty<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let mut storage = make();
    let mut q2 = message("again", QoS::ExactlyOnce);
    q2.payload = Bytes::from_static(b"second");
    storage
        .commit(&[
            saved("a", SessionExpiry::Never),
            queued("a", 5, QoS::AtLeastOnce),
            sent("a", 5, 1),
        ])
        .unwrap();
    let committed = storage
        .commit(&[
            SessionWrite::MessageQueued {
                client_id: text("a"),
                seq: 5,
                message: Box::new(q2.clone()),
            },
            sent("a", 5, 2),
        ])
        .unwrap();
    assert_eq!(committed, Committed::default());
    let loaded = storage.load().unwrap();
    assert_eq!(
        loaded.sessions[0].inflight,
        [
            (
                pid(1),
                InflightState::AwaitingPubAck(message("t", QoS::AtLeastOnce))
            ),
            (pid(2), InflightState::AwaitingPubRec(q2)),
        ]
    );
    assert!(loaded.sessions[0].queued.is_empty());
}

pub(super) fn inflight_entries_load_in_send_order<S: SessionStorage>(make: impl Fn() -> S) {
    let mut storage = make();
    storage
        .commit(&[
            saved("a", SessionExpiry::Never),
            queued("a", 1, QoS::AtLeastOnce),
            queued("a", 2, QoS::ExactlyOnce),
            queued("a", 3, QoS::AtLeastOnce),
            sent("a", 3, 9),
            sent("a", 1, 2),
        ])
        .unwrap();
    storage.commit(&[sent("a", 2, 5), released(5)]).unwrap();
    let ids: Vec<u16> = (storage.load().unwrap().sessions[0].inflight.iter())
        .map(|(id, _)| id.get())
        .collect();
    assert_eq!(ids, [9, 2, 5]);
}

pub(super) fn the_last_queued_number_is_found_after_the_last_message_left<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let mut storage = make();
    storage
        .commit(&[
            saved("a", SessionExpiry::Never),
            queued("a", 1, QoS::AtLeastOnce),
            queued("a", 2, QoS::AtLeastOnce),
            queued("a", 3, QoS::AtLeastOnce),
            dropped(3),
        ])
        .unwrap();
    let committed = storage
        .commit(&[
            dropped(2),
            queued("a", 1, QoS::AtLeastOnce),
            queued("a", 2, QoS::AtLeastOnce),
            sent("a", 2, 1),
            queued("a", 2, QoS::AtLeastOnce),
            queued("a", 4, QoS::AtLeastOnce),
            dropped(4),
        ])
        .unwrap();
    assert_eq!(committed.skipped, [skip("MessageQueued", "a")]);
    let committed = storage
        .commit(&[
            queued("a", 2, QoS::AtLeastOnce),
            queued("a", 3, QoS::AtLeastOnce),
        ])
        .unwrap();
    assert_eq!(committed.skipped, [skip("MessageQueued", "a")]);
    assert_eq!(seqs(&storage.load().unwrap().sessions[0].queued), [1, 2, 3]);
}

pub(super) fn a_removed_session_starts_again_empty<S: SessionStorage>(make: impl Fn() -> S) {
    let mut storage = make();
    let full = [
        saved("a", SessionExpiry::Never),
        subscribed("a", "t", QoS::AtLeastOnce),
        queued("a", 1, QoS::AtLeastOnce),
        queued("a", 2, QoS::ExactlyOnce),
        queued("a", 3, QoS::AtLeastOnce),
        sent("a", 2, 1),
        qos2_received(4),
    ];
    storage.commit(&full).unwrap();
    let removed = SessionWrite::SessionRemoved {
        client_id: text("a"),
    };
    let mut batch = vec![queued("a", 4, QoS::AtLeastOnce), removed.clone()];
    batch.extend(full.iter().cloned());
    batch.push(removed.clone());
    batch.push(saved("a", SessionExpiry::After(5)));
    storage.commit(&batch).unwrap();
    let expected = StoredSession::new(
        text("a"),
        ProtocolVersion::V5,
        SessionExpiry::After(5),
        None,
    );
    assert_eq!(
        storage.load().unwrap().sessions,
        std::slice::from_ref(&expected)
    );
    assert!(
        storage
            .queued_after(&text("a"), None, 10)
            .unwrap()
            .is_empty()
    );
    storage
        .commit(&[removed, saved("a", SessionExpiry::After(5))])
        .unwrap();
    assert_eq!(storage.load().unwrap().sessions, [expected]);
}
