//! `[[auto_subscribe]]` (issue 49): a client that connects is subscribed to the configured
//! filters with `%c` and `%u` filled in, gets no SUBACK for them, receives what they match
//! (the retained messages included), and the ACL still decides.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::Duration;

use codec::{Packet, ProtocolVersion, QoS, ReasonCode};

use crate::client::{RawClient, publish_packet};
use crate::harness::TestBroker;

const V5: ProtocolVersion = ProtocolVersion::V5;

const AUTO: &str = r#"
[[auto_subscribe]]
filter = "devices/%c/commands"
qos = 1

[[auto_subscribe]]
filter = "users/%u/#"
qos = 0
"#;

/// A client `id` (logged in as `user`, if any) on `broker`.
fn connect(broker: &TestBroker, id: &str, user: Option<&str>) -> RawClient {
    match user {
        Some(user) => RawClient::connected_as(broker.addr(), V5, id, user),
        None => RawClient::connected_clean(broker.addr(), V5, id),
    }
}

#[test]
fn a_connecting_client_is_subscribed_to_its_filters() {
    let broker = TestBroker::with_config(AUTO);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    let mut retained = publish_packet("devices/dev1/commands", b"boot", QoS::AtLeastOnce, Some(1));
    retained.retain = true;
    assert_eq!(
        publisher.publish(retained),
        ReasonCode::NoMatchingSubscribers
    );

    let mut device = connect(&broker, "dev1", Some("ann"));
    let first = device.expect_publish_acked();
    assert_eq!(
        (first.topic(), first.retain),
        ("devices/dev1/commands", true)
    );
    publisher.publish_simple("devices/dev1/commands", b"reboot", QoS::AtLeastOnce);
    assert_eq!(device.expect_publish_acked().payload(), b"reboot");
    publisher.publish_simple("users/ann/inbox", b"hi", QoS::AtMostOnce);
    assert_eq!(device.expect_publish().topic(), "users/ann/inbox");
    publisher.publish_simple("devices/dev2/commands", b"not yours", QoS::AtLeastOnce);
    device.expect_silence(Duration::from_millis(200));
}

#[test]
fn no_suback_is_sent_and_a_filter_naming_a_missing_username_is_skipped() {
    let broker = TestBroker::with_config(AUTO);
    let mut device = connect(&broker, "dev2", None);
    device.ping();
    match device.next_event(Duration::from_millis(300)) {
        crate::client::Event::Timeout => {}
        crate::client::Event::Packet(packet) => {
            assert!(
                !matches!(*packet, Packet::SubAck(_)),
                "a SUBACK nobody asked for"
            );
        }
        other => panic!("{other:?}"),
    }
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    publisher.publish_simple("users//inbox", b"x", QoS::AtMostOnce);
    publisher.publish_simple("devices/dev2/commands", b"y", QoS::AtLeastOnce);
    assert_eq!(
        device.expect_publish_acked().topic(),
        "devices/dev2/commands"
    );
}

#[test]
fn the_acl_decides_an_auto_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("acl");
    // Anonymous clients (the publisher) may write anywhere; ann may read only her own.
    std::fs::write(&acl, "topic write #\nuser ann\ntopic read users/ann/#\n").unwrap();
    let config = format!(
        "{AUTO}\n[auth]\nacl_file = {:?}\n",
        acl.display().to_string()
    );
    let broker = TestBroker::with_config(&config);
    let mut device = connect(&broker, "dev3", Some("ann"));
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    publisher.publish_simple("devices/dev3/commands", b"denied", QoS::AtLeastOnce);
    publisher.publish_simple("users/ann/inbox", b"allowed", QoS::AtMostOnce);
    let got = device.expect_publish();
    assert_eq!(
        (got.topic(), got.payload()),
        ("users/ann/inbox", &b"allowed"[..])
    );
}
