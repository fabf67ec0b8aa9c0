use super::*;
use codec::{QoS, RetainHandling};
use ring_runtime::{InputStamp, ShardId};
use router::{TableConfig, TopicLimits};

use crate::message::test_message;

const SUBSCRIBER: SubscriberId = SubscriberId(7);
const OTHER_SHARD: ShardId = ShardId::new(1);

fn table() -> SubscriptionTable {
    SubscriptionTable::new(TableConfig {
        shared_strategy: router::SharedStrategy::RoundRobin,
        random_seed: 1,
    })
}

fn options(qos: QoS) -> SubscriptionOptions {
    SubscriptionOptions {
        qos,
        no_local: false,
        retain_as_published: false,
        retain_handling: RetainHandling::SendAtSubscribe,
    }
}

fn filter(text: &str) -> SubscriptionFilter {
    SubscriptionFilter::new(text, &TopicLimits::default()).expect("valid filter")
}

/// A book with one message on `topic` from `publisher`, routed against a fence that marked
/// drain 5 on shard 1 and the horizon 10.
fn book_with(topic: &'static str, publisher: Option<SubscriberId>) -> KeptPublishes {
    let mut book = KeptPublishes::new(1 << 20);
    book.record(RoutedAgainst {
        fence: InputFence::PASSED,
        marks: Some(FenceMarks::from_marks(vec![0, 5])),
        horizon: ChangeSeq(10),
    });
    book.keep_if_recording(|| KeptMessage {
        topic: TopicName::new(topic, &TopicLimits::default()).expect("valid topic"),
        message: test_message(topic),
        publisher,
    });
    book.stop_recording();
    book
}

/// A change stamped `seq` on shard 1, whose input was taken after its drain `drain`.
fn stamped(seq: u64, drain: u64) -> (ChangeSeq, ChangeSource) {
    let source = ChangeSource {
        shard: OTHER_SHARD,
        input: InputStamp::after_drain(drain),
    };
    (ChangeSeq(seq), source)
}

fn owed(
    book: &KeptPublishes,
    text: &str,
    at: (ChangeSeq, ChangeSource),
    table: &mut SubscriptionTable,
) -> usize {
    let filter = filter(text);
    let new = NewSubscription {
        subscriber: SUBSCRIBER,
        filter: &filter,
        options: options(QoS::AtMostOnce),
        id: None,
    };
    book.owed_to(&new, at, table, |_| true).len()
}

#[test]
fn a_subscription_that_may_precede_a_kept_message_is_owed_its_copy() {
    let book = book_with("a/b", None);
    let mut table = table();
    // Taken before the fence's mark on its shard, or stamped under the horizon: owed.
    assert_eq!(owed(&book, "a/+", stamped(12, 4), &mut table), 1);
    assert_eq!(owed(&book, "a/+", stamped(9, 6), &mut table), 1);
    // Taken after a drain begun after the fence, stamped after the horizon: not owed.
    assert_eq!(owed(&book, "a/+", stamped(12, 5), &mut table), 0);
    // A filter that does not match: not owed.
    assert_eq!(owed(&book, "a/c", stamped(12, 4), &mut table), 0);
    let copies = {
        let filter = filter("a/b");
        let new = NewSubscription {
            subscriber: SUBSCRIBER,
            filter: &filter,
            options: options(QoS::AtMostOnce),
            id: None,
        };
        book.owed_to(&new, stamped(12, 4), &mut table, |_| true)
    };
    assert_eq!(copies[0].qos, QoS::AtMostOnce, "the lower of the two QoS");
    assert_eq!(copies[0].subscriber, SUBSCRIBER);
}

#[test]
fn no_copy_where_the_subscriber_already_had_the_message() {
    let book = book_with("a/b", None);
    let mut table = table();
    table.subscribe(SUBSCRIBER, &filter("a/#"), options(QoS::AtLeastOnce), None);
    // Another subscription reached the message: no second copy.
    assert_eq!(owed(&book, "a/b", stamped(12, 4), &mut table), 0);
    // The same filter again (a replaced subscription): none either.
    assert_eq!(owed(&book, "a/#", stamped(12, 4), &mut table), 0);
}

#[test]
fn no_local_and_shared_groups_are_respected() {
    let own = book_with("a/b", Some(SUBSCRIBER));
    let mut table = table();
    let filter = filter("a/b");
    let mut no_local = options(QoS::AtMostOnce);
    no_local.no_local = true;
    let new = NewSubscription {
        subscriber: SUBSCRIBER,
        filter: &filter,
        options: no_local,
        id: None,
    };
    assert!(
        own.owed_to(&new, stamped(12, 4), &mut table, |_| true)
            .is_empty()
    );
    // A new group gets the copy; a group that already had a member got the message.
    let book = book_with("a/b", None);
    assert_eq!(owed(&book, "$share/g/a/b", stamped(12, 4), &mut table), 1);
    let filter = self::filter("$share/g/a/b");
    let new = NewSubscription {
        subscriber: SUBSCRIBER,
        filter: &filter,
        options: options(QoS::AtMostOnce),
        id: None,
    };
    let elsewhere = book.owed_to(&new, stamped(12, 4), &mut table, |_| false);
    assert!(elsewhere.is_empty(), "the cluster chose the group's member");
    table.subscribe(
        SubscriberId(8),
        &self::filter("$share/g/a/b"),
        options(QoS::AtMostOnce),
        None,
    );
    assert_eq!(owed(&book, "$share/g/a/b", stamped(12, 4), &mut table), 0);
}

#[test]
fn kept_messages_retire_once_their_fence_passed_and_the_horizon_then_is_applied() {
    let mut book = book_with("a/b", None);
    book.retire(ChangeSeq(100), |_| false, || ChangeSeq(20));
    assert!(!book.is_empty(), "the fence has not passed");
    book.retire(ChangeSeq(15), |_| true, || ChangeSeq(20));
    assert!(
        !book.is_empty(),
        "changes stamped before the fence passed are not applied"
    );
    book.retire(ChangeSeq(20), |_| true, || ChangeSeq(30));
    assert!(book.is_empty());
    assert!(book.has_room());
}

#[test]
fn the_book_is_bounded_in_bytes_counting_a_borrowed_receive_buffer_once() {
    let mut book = KeptPublishes::new(40_000);
    let against = RoutedAgainst {
        fence: InputFence::PASSED,
        marks: None,
        horizon: ChangeSeq(1),
    };
    book.record(against);
    let qos0 = |topic: &'static str| {
        let mut message = test_message(topic);
        Arc::get_mut(&mut message).expect("unshared").qos = QoS::AtMostOnce;
        KeptMessage {
            topic: TopicName::new(topic, &TopicLimits::default()).expect("valid topic"),
            message,
            publisher: None,
        }
    };
    book.reading(16_384);
    book.keep_if_recording(|| qos0("a"));
    book.keep_if_recording(|| qos0("b"));
    assert!(book.has_room(), "one buffer counted for both messages");
    book.reading(16_384);
    book.keep_if_recording(|| qos0("c"));
    assert!(book.has_room());
    book.reading(16_384);
    book.keep_if_recording(|| qos0("d"));
    assert!(!book.has_room(), "three buffers are over 40,000 bytes");
    book.stop_recording();
    book.retire(ChangeSeq(1), |_| true, || ChangeSeq(1));
    assert!(book.is_empty() && book.has_room());
}

#[test]
fn a_kept_message_counts_the_shared_record_it_keeps_alive() {
    // 100 QoS 1 messages of one byte: their topics and payloads are 200 bytes, but each keeps
    // its `Arc<Message>` (over 100 bytes) alive as long as it is kept.
    let mut book = KeptPublishes::new(10_000);
    book.record(RoutedAgainst {
        fence: InputFence::PASSED,
        marks: None,
        horizon: ChangeSeq(1),
    });
    for _ in 0..100 {
        book.keep_if_recording(|| KeptMessage {
            topic: TopicName::new("a", &TopicLimits::default()).expect("valid topic"),
            message: test_message("a"),
            publisher: None,
        });
    }
    assert!(!book.has_room(), "100 kept messages are over 10,000 bytes");
}
