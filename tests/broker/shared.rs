//! Shared subscriptions: messages are spread over the group's members, each delivered to one,
//! and a departing member's unacknowledged QoS 1 messages go to another member.

use std::collections::BTreeSet;

use codec::{QoS, ReasonCode};

use crate::client::{QUIET, RawClient, V5};
use crate::harness::TestBroker;

const GROUP: &str = "$share/workers/jobs/+";

fn payloads(publishes: &[codec::Publish]) -> Vec<String> {
    publishes
        .iter()
        .map(|p| String::from_utf8_lossy(p.payload()).into_owned())
        .collect()
}

#[test]
fn shared_group_spreads_messages_over_members_once_each() {
    let broker = TestBroker::start();
    let mut members: Vec<RawClient> = (0..3)
        .map(|i| {
            let mut m = RawClient::connected_clean(broker.addr(), V5, &format!("member{i}"));
            m.subscribe(GROUP, QoS::AtLeastOnce);
            m
        })
        .collect();
    let mut plain = RawClient::connected_clean(broker.addr(), V5, "not-shared");
    plain.subscribe("jobs/+", QoS::AtMostOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "producer");
    for i in 0..30 {
        let reason = publisher.publish_simple(
            &format!("jobs/{i}"),
            format!("{i}").as_bytes(),
            QoS::AtLeastOnce,
        );
        assert_eq!(reason, ReasonCode::Success);
    }
    let mut all = BTreeSet::new();
    let mut total = 0;
    crate::harness::wait_until("30 shared deliveries", || {
        for member in &mut members {
            for p in payloads(&member.drain_publishes(true)) {
                assert!(all.insert(p.clone()), "{p} delivered to two members");
                total += 1;
            }
        }
        (total == 30).then_some(())
    });
    for member in &mut members {
        member.ping();
        member.expect_silence(QUIET);
    }
    assert_eq!(all.len(), 30);
    for _ in 0..30 {
        plain.expect_publish();
    }
}

#[test]
fn every_member_gets_a_share() {
    let broker = TestBroker::start();
    let mut a = RawClient::connected_clean(broker.addr(), V5, "share-a");
    let mut b = RawClient::connected_clean(broker.addr(), V5, "share-b");
    a.subscribe(GROUP, QoS::AtMostOnce);
    b.subscribe(GROUP, QoS::AtMostOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "producer");
    for i in 0..20 {
        publisher.publish_simple("jobs/x", format!("{i}").as_bytes(), QoS::AtLeastOnce);
    }
    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
    crate::harness::wait_until("20 shared deliveries", || {
        from_a.extend(payloads(&a.drain_publishes(true)));
        from_b.extend(payloads(&b.drain_publishes(true)));
        (from_a.len() + from_b.len() >= 20).then_some(())
    });
    assert!(
        !from_a.is_empty() && !from_b.is_empty(),
        "a: {from_a:?}, b: {from_b:?}"
    );
    assert_eq!(from_a.len() + from_b.len(), 20);
}

#[test]
fn departing_member_unacknowledged_qos1_messages_go_to_another_member() {
    let broker = TestBroker::start();
    let mut leaver = RawClient::connected_clean(broker.addr(), V5, "leaver");
    let mut stayer = RawClient::connected_clean(broker.addr(), V5, "stayer");
    leaver.subscribe(GROUP, QoS::AtLeastOnce);
    stayer.subscribe(GROUP, QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "producer");
    for i in 0..20 {
        publisher.publish_simple("jobs/x", format!("{i}").as_bytes(), QoS::AtLeastOnce);
    }
    let mut got_by_stayer = BTreeSet::new();
    let mut held = Vec::new();
    crate::harness::wait_until("all 20 delivered once", || {
        held.extend(payloads(&leaver.drain_publishes(false)));
        got_by_stayer.extend(payloads(&stayer.drain_publishes(true)));
        (held.len() + got_by_stayer.len() >= 20).then_some(())
    });
    assert!(!held.is_empty(), "the leaver got a share");
    leaver.drop_abruptly();
    crate::harness::wait_until("the leaver's messages at the stayer", || {
        got_by_stayer.extend(payloads(&stayer.drain_publishes(true)));
        held.iter().all(|p| got_by_stayer.contains(p)).then_some(())
    });
    assert_eq!(got_by_stayer.len(), 20, "every message reached the stayer");
    stayer.ping();
    stayer.expect_silence(QUIET);
}
