//! A client id is bound to the identity whose session it names (issue 47): another username (or
//! no username) connecting with it is refused, 5.0 CONNACK 0x85 / 3.1.1 return code 2, and the
//! owner's session, with its queued messages, stays intact; `auth.client_id_owner_check =
//! false` lets any identity take it as before; `auth.use_username_as_clientid` replaces the
//! client id with the username.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::Path;
use std::process::Command;

use codec::{ConnAck, ProtocolVersion, QoS, ReasonCode};

use crate::client::{RawClient, V5, connect_packet, persistent_connect, s};
use crate::harness::TestBroker;
use crate::passwords::passwd_file;

const V311: ProtocolVersion = ProtocolVersion::V3_1_1;

/// A broker with the users alice and bob (password `pw-NAME`), anonymous clients allowed, and
/// `extra` keys of `[auth]`.
fn broker(dir: &Path, extra: &str) -> TestBroker {
    let file = dir.join("passwd");
    passwd_file(&file, "alice", "pw-alice");
    let status = Command::new("mosquitto_passwd")
        .arg("-b")
        .arg(&file)
        .args(["bob", "pw-bob"])
        .status()
        .unwrap();
    assert!(status.success());
    TestBroker::with_config(&format!(
        "[auth]\npassword_file = {:?}\nallow_anonymous = true\n{extra}",
        file.display().to_string()
    ))
}

/// A CONNECT for `id` as `user` (`None`: anonymous); persistent (expiry 600 s in 5.0) or clean.
fn connect_as(
    broker: &TestBroker,
    protocol: ProtocolVersion,
    id: &str,
    user: Option<&str>,
    persistent: bool,
) -> (RawClient, ConnAck) {
    let mut connect = if persistent {
        persistent_connect(protocol, id, 600)
    } else {
        connect_packet(protocol, id, true)
    };
    if let Some(user) = user {
        connect.username = Some(s(user));
        connect.password = Some(bytes::Bytes::from(format!("pw-{user}")));
    }
    RawClient::connect(broker.addr(), connect)
}

/// alice's persistent session `id`, subscribed to `inbox/ID` at QoS 1, left with two messages
/// queued.
fn alice_leaves_messages(broker: &TestBroker, protocol: ProtocolVersion, id: &str) {
    let (mut alice, ack) = connect_as(broker, protocol, id, Some("alice"), true);
    assert_eq!(ack.reason_code, ReasonCode::Success);
    alice.subscribe(&format!("inbox/{id}"), QoS::AtLeastOnce);
    alice.disconnect();
    let (mut sender, ack) = connect_as(broker, protocol, &format!("{id}-sender"), None, false);
    assert_eq!(ack.reason_code, ReasonCode::Success);
    for payload in [&b"one"[..], b"two"] {
        let reason = sender.publish_simple(&format!("inbox/{id}"), payload, QoS::AtLeastOnce);
        assert!(!reason.is_error());
    }
    sender.disconnect();
}

/// alice resumes `id` (Session Present) and receives both queued messages.
fn alice_resumes(broker: &TestBroker, protocol: ProtocolVersion, id: &str) {
    let (mut alice, ack) = connect_as(broker, protocol, id, Some("alice"), true);
    assert_eq!(ack.reason_code, ReasonCode::Success);
    assert!(ack.session_present, "{protocol:?}: alice's session kept");
    let payloads: Vec<Vec<u8>> = (0..2)
        .map(|_| alice.expect_publish_acked().payload().to_vec())
        .collect();
    assert_eq!(payloads, [b"one".to_vec(), b"two".to_vec()]);
    alice.disconnect();
}

#[test]
fn another_identity_cannot_take_a_persistent_session_and_its_owner_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path(), "");
    for protocol in [V5, V311] {
        let id = format!("alice-dev-{}", u8::from(protocol.is_v5()));
        alice_leaves_messages(&broker, protocol, &id);
        // bob (a good password), resuming or wiping, and an anonymous client: all refused.
        for (user, persistent) in [
            (Some("bob"), true),
            (Some("bob"), false),
            (None, true),
            (None, false),
        ] {
            let (mut client, ack) = connect_as(&broker, protocol, &id, user, persistent);
            assert_eq!(
                ack.reason_code,
                ReasonCode::ClientIdentifierNotValid,
                "{protocol:?} {user:?} persistent {persistent}"
            );
            assert!(!ack.session_present);
            client.expect_closed();
        }
        alice_resumes(&broker, protocol, &id);
    }
}

#[test]
fn a_session_of_an_anonymous_client_is_not_a_users_to_take() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path(), "");
    for protocol in [V5, V311] {
        let (client, ack) = connect_as(&broker, protocol, "anon-dev", None, true);
        assert_eq!(ack.reason_code, ReasonCode::Success);
        client.disconnect();
        let (mut alice, ack) = connect_as(&broker, protocol, "anon-dev", Some("alice"), true);
        assert_eq!(ack.reason_code, ReasonCode::ClientIdentifierNotValid);
        alice.expect_closed();
        let (client, ack) = connect_as(&broker, protocol, "anon-dev", None, true);
        assert_eq!(ack.reason_code, ReasonCode::Success);
        assert!(ack.session_present);
        // Clean start 1 and no expiry: the session ends with the connection, and so does the
        // binding.
        client.disconnect();
        let (client, ack) = connect_as(&broker, protocol, "anon-dev", None, false);
        assert_eq!(ack.reason_code, ReasonCode::Success);
        client.disconnect();
    }
}

#[test]
fn a_connected_clients_session_is_not_taken_over_by_another_identity() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path(), "");
    let (mut alice, ack) = connect_as(&broker, V5, "alice-live", Some("alice"), false);
    assert_eq!(ack.reason_code, ReasonCode::Success);
    let (mut bob, ack) = connect_as(&broker, V5, "alice-live", Some("bob"), false);
    assert_eq!(ack.reason_code, ReasonCode::ClientIdentifierNotValid);
    bob.expect_closed();
    alice.ping();
}

#[test]
fn with_the_owner_check_off_any_identity_takes_the_session_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path(), "client_id_owner_check = false\n");
    for protocol in [V5, V311] {
        let id = format!("shared-dev-{}", u8::from(protocol.is_v5()));
        alice_leaves_messages(&broker, protocol, &id);
        let (bob, ack) = connect_as(&broker, protocol, &id, Some("bob"), true);
        assert_eq!(ack.reason_code, ReasonCode::Success);
        assert!(
            ack.session_present,
            "{protocol:?}: bob resumed alice's session"
        );
        bob.drop_abruptly();
    }
}

#[test]
fn use_username_as_clientid_names_the_session_after_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path(), "use_username_as_clientid = true\n");
    let (mut alice, ack) = connect_as(&broker, V5, "first", Some("alice"), true);
    assert_eq!(ack.reason_code, ReasonCode::Success);
    alice.subscribe("inbox/alice", QoS::AtLeastOnce);
    alice.disconnect();
    // Another client id, the same user: the same session.
    let (alice, ack) = connect_as(&broker, V5, "second", Some("alice"), true);
    assert_eq!(ack.reason_code, ReasonCode::Success);
    assert!(ack.session_present);
    alice.disconnect();
    // No username: refused.
    for protocol in [V5, V311] {
        let (mut anonymous, ack) = connect_as(&broker, protocol, "alice", None, true);
        assert_eq!(ack.reason_code, ReasonCode::NotAuthorized);
        anonymous.expect_closed();
    }
}
