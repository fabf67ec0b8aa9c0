//! `[[rewrite]]` topic rewrite rules (issue 49): a PUBLISH to a legacy topic goes out on the
//! rewritten one, `${clientid}` and the groups filled in; a SUBSCRIBE's filter is rewritten and
//! its UNSUBSCRIBE finds it; the ACL judges the rewritten topic, not the one written.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::Duration;

use codec::{ProtocolVersion, QoS, ReasonCode};

use crate::client::{RawClient, connect_packet, s};
use crate::harness::TestBroker;

const V5: ProtocolVersion = ProtocolVersion::V5;

const RULES: &str = r#"
[[rewrite]]
action = "publish"
source_topic = "legacy/#"
re = "^legacy/(\\w+)/data$"
dest_topic = "devices/$1/telemetry/${clientid}"

[[rewrite]]
action = "subscribe"
source_topic = "old/#"
re = "^old/(.*)$"
dest_topic = "new/$1"
"#;

#[test]
fn a_publish_goes_out_on_the_rewritten_topic() {
    let broker = TestBroker::with_config(RULES);
    let mut subscriber = RawClient::connected_clean(broker.addr(), V5, "sub");
    subscriber.subscribe("devices/+/telemetry/+", QoS::AtLeastOnce);
    let mut device = RawClient::connected_clean(broker.addr(), V5, "dev7");
    let reason = device.publish_simple("legacy/d1/data", b"21.5", QoS::AtLeastOnce);
    assert_eq!(reason, ReasonCode::Success);
    let got = subscriber.expect_publish_acked();
    assert_eq!(got.topic(), "devices/d1/telemetry/dev7");
    // The filter matches and the expression does not: the topic stays as written.
    device.publish_simple("legacy/d1/other", b"x", QoS::AtLeastOnce);
    subscriber.expect_silence(Duration::from_millis(200));
}

#[test]
fn a_subscription_is_rewritten_and_its_unsubscribe_finds_it() {
    let broker = TestBroker::with_config(RULES);
    let mut client = RawClient::connected_clean(broker.addr(), V5, "c");
    client.subscribe("old/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "p");
    publisher.publish_simple("new/a", b"1", QoS::AtLeastOnce);
    assert_eq!(client.expect_publish_acked().topic(), "new/a");
    publisher.publish_simple("old/a", b"2", QoS::AtLeastOnce);
    client.expect_silence(Duration::from_millis(200));
    let ack = client.unsubscribe("old/#");
    assert_eq!(ack.reason_codes, vec![ReasonCode::Success]);
    publisher.publish_simple("new/b", b"3", QoS::AtLeastOnce);
    client.expect_silence(Duration::from_millis(200));
}

#[test]
fn the_acl_judges_the_rewritten_topic() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("acl");
    std::fs::write(&acl, "user dev\ntopic write legacy/#\n").unwrap();
    let config = format!(
        "{RULES}\n[auth]\nacl_file = {:?}\n",
        acl.display().to_string()
    );
    let broker = TestBroker::with_config(&config);
    let mut connect = connect_packet(V5, "dev7", true);
    connect.username = Some(s("dev"));
    let (mut device, ack) = RawClient::connect(broker.addr(), connect);
    assert_eq!(ack.reason_code, ReasonCode::Success);
    // Written to legacy/..., which the ACL allows; it would go to devices/..., which it
    // does not: refused.
    let reason = device.publish_simple("legacy/d1/data", b"x", QoS::AtLeastOnce);
    assert_eq!(reason, ReasonCode::NotAuthorized);
    // Not rewritten (the expression does not match): allowed as written.
    let reason = device.publish_simple("legacy/d1/other", b"x", QoS::AtLeastOnce);
    assert!(!reason.is_error(), "{reason:?}");
}
