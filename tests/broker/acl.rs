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
use crate::harness::TestBroker;

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
