//! `auth.acl_file`: mosquitto's ACL format with mosquitto 2.0's semantics, enforced on
//! PUBLISH (PUBACK 0x87), SUBSCRIBE (SUBACK 0x87 for a filter with nothing readable) and on what
//! leaves for a partly readable subscription (retained messages included); `$SYS` closed to
//! ordinary users; reload.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::Path;
use std::time::Duration;

use codec::{ProtocolVersion, QoS, ReasonCode};

use crate::client::{
    RawClient, V5, connect_packet, publish_packet, qos_options, s, subscribe_packet,
};
use crate::harness::{TestBroker, wait_until};

const ACL: &str = "\
# anonymous clients
topic read public/#

user alice
topic readwrite alice/#
topic deny alice/private
topic read sensors/+/temp

user writer
topic write #

pattern read devices/%c/#
";

fn broker_with(acl: &Path, text: &str) -> TestBroker {
    std::fs::write(acl, text).unwrap();
    TestBroker::with_config(&format!(
        "[auth]\nacl_file = {:?}\n",
        acl.display().to_string()
    ))
}

/// A client connected as `user` (no password file: the name is taken as given).
fn client(
    broker: &TestBroker,
    protocol: ProtocolVersion,
    id: &str,
    user: Option<&str>,
) -> RawClient {
    let mut connect = connect_packet(protocol, id, true);
    connect.username = user.map(s);
    let (client, ack) = RawClient::connect(broker.addr(), connect);
    assert_eq!(ack.reason_code, ReasonCode::Success);
    client
}

fn suback(client: &mut RawClient, filter: &str) -> ReasonCode {
    let id = client.next_packet_id();
    let ack = client.subscribe_with(subscribe_packet(id, filter, qos_options(QoS::AtLeastOnce)));
    ack.reason_codes[0]
}

#[test]
fn publish_and_subscribe_follow_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir.path().join("acl"), ACL);
    let mut alice = client(&broker, V5, "alice-1", Some("alice"));
    assert!(
        !alice
            .publish_simple("alice/x", b"mine", QoS::AtLeastOnce)
            .is_error()
    );
    assert_eq!(
        alice.publish_simple("bob/x", b"not mine", QoS::AtLeastOnce),
        ReasonCode::NotAuthorized
    );
    assert_eq!(
        alice.publish_simple("alice/private", b"denied", QoS::ExactlyOnce),
        ReasonCode::NotAuthorized
    );
    assert_eq!(suback(&mut alice, "bob/#"), ReasonCode::NotAuthorized);
    assert_eq!(suback(&mut alice, "$SYS/#"), ReasonCode::NotAuthorized);
    assert_eq!(suback(&mut alice, "public/#"), ReasonCode::NotAuthorized);
    assert_eq!(
        suback(&mut alice, "alice/#"),
        ReasonCode::granted(QoS::AtLeastOnce)
    );
    assert_eq!(
        suback(&mut alice, "devices/alice-1/#"),
        ReasonCode::granted(QoS::AtLeastOnce)
    );

    let mut anonymous = client(&broker, V5, "anon", None);
    assert_eq!(
        suback(&mut anonymous, "public/#"),
        ReasonCode::granted(QoS::AtLeastOnce)
    );
    assert_eq!(suback(&mut anonymous, "alice/#"), ReasonCode::NotAuthorized);
    assert_eq!(
        anonymous.publish_simple("public/x", b"read only", QoS::AtLeastOnce),
        ReasonCode::NotAuthorized
    );

    // MQTT 3.1.1: the refused filter gets the failure return code 0x80.
    let mut old = client(&broker, ProtocolVersion::V3_1_1, "alice-2", Some("alice"));
    assert_eq!(suback(&mut old, "bob/#"), ReasonCode::UnspecifiedError);
}

#[test]
fn a_partly_readable_subscription_receives_only_the_readable_topics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir.path().join("acl"), ACL);
    let mut writer = client(&broker, V5, "w", Some("writer"));
    // Retained before the subscription: sent at SUBSCRIBE, checked too.
    for (topic, payload) in [("sensors/a/temp", "21"), ("sensors/a/humidity", "40")] {
        let id = writer.next_packet_id();
        let mut retained = publish_packet(topic, payload.as_bytes(), QoS::AtLeastOnce, Some(id));
        retained.retain = true;
        assert!(!writer.publish(retained).is_error());
    }
    let mut alice = client(&broker, V5, "alice-1", Some("alice"));
    assert_eq!(
        suback(&mut alice, "sensors/#"),
        ReasonCode::granted(QoS::AtLeastOnce)
    );
    let retained = alice.expect_publish_acked();
    assert_eq!(retained.topic(), "sensors/a/temp");
    alice.expect_silence(Duration::from_millis(300));
    // Live messages, QoS 0 and 1.
    for qos in [QoS::AtMostOnce, QoS::AtLeastOnce] {
        writer.publish_simple("sensors/b/humidity", b"55", qos);
        writer.publish_simple("sensors/b/temp", b"19", qos);
        let live = alice.expect_publish_acked();
        assert_eq!(live.topic(), "sensors/b/temp");
    }
    alice.expect_silence(Duration::from_millis(300));
    // A fully readable subscription is not checked per message and gets everything.
    assert_eq!(
        suback(&mut alice, "devices/alice-1/#"),
        ReasonCode::granted(QoS::AtLeastOnce)
    );
    writer.publish_simple("devices/alice-1/a/b", b"x", QoS::AtLeastOnce);
    assert_eq!(alice.expect_publish_acked().topic(), "devices/alice-1/a/b");
}

#[test]
fn reload_applies_new_rules_and_keeps_the_old_ones_when_the_file_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("acl");
    let broker = broker_with(&acl, ACL);
    let mut alice = client(&broker, V5, "alice-1", Some("alice"));
    assert_eq!(suback(&mut alice, "bob/#"), ReasonCode::NotAuthorized);
    std::fs::write(&acl, format!("{ACL}\nuser alice\ntopic read bob/#\n")).unwrap();
    assert_eq!(broker.reload(), Vec::<String>::new());
    assert_eq!(
        suback(&mut alice, "bob/#"),
        ReasonCode::granted(QoS::AtLeastOnce)
    );
    std::fs::write(&acl, "frobnicate x\n").unwrap();
    let errors = broker.reload();
    assert!(
        errors.len() == 1 && errors[0].contains(&acl.display().to_string()),
        "{errors:?}"
    );
    assert_eq!(
        suback(&mut alice, "bob/x"),
        ReasonCode::granted(QoS::AtLeastOnce)
    );
}

/// A rule added by a reload reaches subscriptions made before it: `public/#` was wholly
/// readable when bob subscribed; once `topic deny public/secret/#` is in force for him, what
/// leaves on that subscription is checked against the new rules (mosquitto stops delivering at
/// once), and every refused copy is counted.
#[test]
fn a_reloaded_acl_reaches_existing_subscriptions() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("acl");
    let rules = "user bob\ntopic read public/#\n\nuser writer\ntopic write #\n";
    let broker = broker_with(&acl, rules);
    let mut writer = client(&broker, V5, "w", Some("writer"));
    let mut bob = client(&broker, V5, "bob-1", Some("bob"));
    assert_eq!(
        suback(&mut bob, "public/#"),
        ReasonCode::granted(QoS::AtLeastOnce)
    );
    writer.publish_simple("public/secret/x", b"before", QoS::AtLeastOnce);
    assert_eq!(bob.expect_publish_acked().topic(), "public/secret/x");
    let refused_before = broker.metrics().deliveries_not_authorized;
    std::fs::write(
        &acl,
        format!("{rules}\nuser bob\ntopic deny public/secret/#\n"),
    )
    .unwrap();
    assert_eq!(broker.reload(), Vec::<String>::new());
    for qos in [QoS::AtMostOnce, QoS::AtLeastOnce] {
        writer.publish_simple("public/secret/x", b"after", qos);
        writer.publish_simple("public/news", b"still readable", qos);
        assert_eq!(bob.expect_publish_acked().topic(), "public/news");
    }
    bob.expect_silence(Duration::from_millis(300));
    assert_eq!(
        broker.metrics().deliveries_not_authorized - refused_before,
        2,
        "the two copies on public/secret/x are counted"
    );
    // A new subscription is judged by the new rules too.
    assert_eq!(
        suback(&mut bob, "public/secret/#"),
        ReasonCode::NotAuthorized
    );
}

/// A shared-subscription member the ACL no longer lets read a topic does not swallow its share
/// silently: the copies routed to it are counted, so delivered plus counted is every message
/// (the other member, which may read, gets its own share).
#[test]
fn a_shared_member_that_may_not_read_has_its_share_counted() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("acl");
    let rules = "user full\ntopic read jobs/#\n\nuser writer\ntopic write #\n";
    let broker = broker_with(&acl, &format!("{rules}\nuser partial\ntopic read jobs/#\n"));
    let mut writer = client(&broker, V5, "w", Some("writer"));
    let mut full = client(&broker, V5, "full-1", Some("full"));
    let mut partial = client(&broker, V5, "partial-1", Some("partial"));
    for member in [&mut full, &mut partial] {
        assert_eq!(
            suback(member, "$share/g/jobs/#"),
            ReasonCode::granted(QoS::AtLeastOnce)
        );
    }
    let with_deny =
        format!("{rules}\nuser partial\ntopic read jobs/#\ntopic deny jobs/blocked/#\n");
    std::fs::write(&acl, with_deny).unwrap();
    assert_eq!(broker.reload(), Vec::<String>::new());
    let refused_before = broker.metrics().deliveries_not_authorized;
    const MESSAGES: u64 = 10;
    for n in 0..MESSAGES {
        writer.publish_simple(
            "jobs/blocked/x",
            format!("{n}").as_bytes(),
            QoS::AtLeastOnce,
        );
    }
    let mut delivered = 0;
    let counted = wait_until("every message delivered or counted", || {
        delivered += full.drain_publishes(true).len() as u64;
        let counted = broker.metrics().deliveries_not_authorized - refused_before;
        (delivered + counted >= MESSAGES).then_some(counted)
    });
    partial.expect_silence(Duration::from_millis(300));
    full.expect_silence(Duration::from_millis(300));
    assert!(
        delivered > 0 && counted > 0,
        "both members had a share: {delivered} + {counted}"
    );
    assert_eq!(delivered + counted, MESSAGES, "none vanishes uncounted");
}
