//! The contract of [`SessionStorage`] for writes that do not follow the stored state: each is
//! skipped and reported, and the rest of its batch applies (every engine runs these through
//! `engine_tests.rs`, as the rest of `contract_tests.rs`).

use codec::QoS;

use super::contract_writes::{
    acked, qos2_received, qos2_released, queued, queued_and_sent, released, saved, sent, skip,
    subscribed, text,
};
use super::{SessionStorage, SessionWrite};
use crate::SessionExpiry;

pub(super) fn skipped_writes_are_reported_and_the_rest_of_the_batch_applies<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let mut storage = make();
    storage.commit(&[saved("a", SessionExpiry::Never)]).unwrap();
    let committed = storage
        .commit(&[
            subscribed("a", "t", QoS::AtLeastOnce),
            acked(9),
            subscribed("nobody", "t", QoS::AtMostOnce),
            queued("a", 1, QoS::AtLeastOnce),
        ])
        .unwrap();
    assert_eq!(
        committed.skipped,
        [skip("InflightAcked", "a"), skip("Subscribed", "nobody")]
    );
    let mut expected = make();
    expected
        .commit(&[
            saved("a", SessionExpiry::Never),
            subscribed("a", "t", QoS::AtLeastOnce),
            queued("a", 1, QoS::AtLeastOnce),
        ])
        .unwrap();
    assert_eq!(storage.load().unwrap(), expected.load().unwrap());
}

pub(super) fn each_write_that_does_not_follow_the_stored_state_is_skipped<S: SessionStorage>(
    make: impl Fn() -> S,
) {
    let cases = [
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
        vec![
            saved("a", SessionExpiry::Never),
            queued("a", 1, QoS::AtLeastOnce),
            queued("a", 2, QoS::AtLeastOnce),
            sent("a", 1, 1),
            sent("a", 2, 1),
        ],
        vec![
            saved("a", SessionExpiry::Never),
            queued("a", 5, QoS::AtLeastOnce),
            queued_and_sent("a", 5, 1, QoS::AtLeastOnce),
        ],
        vec![
            saved("a", SessionExpiry::Never),
            queued_and_sent("a", 1, 1, QoS::AtLeastOnce),
            queued_and_sent("a", 2, 1, QoS::ExactlyOnce),
        ],
        vec![
            saved("a", SessionExpiry::Never),
            queued_and_sent("a", 1, 1, QoS::AtMostOnce),
        ],
        vec![saved("a", SessionExpiry::Never), qos2_released(1)],
        vec![
            saved("a", SessionExpiry::Never),
            qos2_received(1),
            qos2_received(1),
        ],
        vec![
            saved("a", SessionExpiry::Never),
            SessionWrite::MessageDropped {
                client_id: text("a"),
                seq: 1,
            },
        ],
        vec![
            saved("a", SessionExpiry::Never),
            SessionWrite::Unsubscribed {
                client_id: text("a"),
                filter: text("t"),
            },
        ],
    ];
    for batch in cases {
        let (last, rest) = batch.split_last().unwrap();
        let mut storage = make();
        let committed = storage.commit(&batch).unwrap();
        let client = String::from_utf8_lossy(last.client_id().unwrap().as_bytes()).into_owned();
        assert_eq!(committed.skipped, [skip(last.kind(), &client)], "{batch:?}");
        let mut expected = make();
        expected.commit(rest).unwrap();
        assert_eq!(
            storage.load().unwrap(),
            expected.load().unwrap(),
            "{batch:?}"
        );
    }
}
