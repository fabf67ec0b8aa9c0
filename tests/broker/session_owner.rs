//! A client id is bound to the identity whose session it names (issue 47): another username (or
//! no username) connecting with it is refused, 5.0 CONNACK 0x85 / 3.1.1 return code 2, and the
//! owner's session, with its queued messages, stays intact, also after a restart (the owner is
//! stored with the session); `auth.client_id_owner_check = false` lets any identity take it as
//! before; `auth.use_username_as_clientid` replaces the client id with the username.

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
use crate::persistence::store_config;

const V311: ProtocolVersion = ProtocolVersion::V3_1_1;

/// A broker with the users alice and bob (password `pw-NAME`), anonymous clients allowed, and
/// `extra` keys of `[auth]`.
fn broker(dir: &Path, extra: &str) -> TestBroker {
    TestBroker::with_config(&auth_config(dir, extra))
}

/// The `[auth]` section of [`broker`], its password file written in `dir`.
fn auth_config(dir: &Path, extra: &str) -> String {
    let file = dir.join("passwd");
    passwd_file(&file, "alice", "pw-alice");
    let status = Command::new("mosquitto_passwd")
        .arg("-b")
        .arg(&file)
        .args(["bob", "pw-bob"])
        .status()
        .unwrap();
    assert!(status.success());
    format!(
        "[auth]\npassword_file = {:?}\nallow_anonymous = true\n{extra}",
        file.display().to_string()
    )
}

/// A broker as [`broker`] (the password file written again) that stores its sessions with the
/// `log` engine in `dir`/store: started again on the same `dir`, it finds them there.
fn storing_broker(dir: &Path, extra: &str) -> TestBroker {
    let store = store_config("log", &dir.join("store"));
    TestBroker::with_store(&format!("{store}{}", auth_config(dir, extra)))
}

/// bob (resuming or wiping) and an anonymous client connecting with `id`: each refused.
fn others_are_refused(broker: &TestBroker, protocol: ProtocolVersion, id: &str) {
    for (user, persistent) in [
        (Some("bob"), true),
        (Some("bob"), false),
        (None, true),
        (None, false),
    ] {
        refused_as(broker, protocol, id, user, persistent);
    }
}

/// `user` connecting with `id` is refused (0x85 / rc 2), without a session, and closed.
fn refused_as(
    broker: &TestBroker,
    protocol: ProtocolVersion,
    id: &str,
    user: Option<&str>,
    persistent: bool,
) {
    let (mut client, ack) = connect_as(broker, protocol, id, user, persistent);
    assert_eq!(
        ack.reason_code,
        ReasonCode::ClientIdentifierNotValid,
        "{protocol:?} {user:?} persistent {persistent}"
    );
    assert!(!ack.session_present);
    client.expect_closed();
}

/// `user` resumes its persistent session `id` (Session Present), then disconnects.
fn resumes_as(broker: &TestBroker, protocol: ProtocolVersion, id: &str, user: Option<&str>) {
    let (client, ack) = connect_as(broker, protocol, id, user, true);
    assert_eq!(ack.reason_code, ReasonCode::Success);
    assert!(ack.session_present, "{protocol:?} {user:?}: session kept");
    client.disconnect();
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
        others_are_refused(&broker, protocol, &id);
        alice_resumes(&broker, protocol, &id);
    }
}

#[test]
fn the_owner_of_a_stored_session_is_still_its_owner_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let id = |protocol: ProtocolVersion| format!("alice-stored-{}", u8::from(protocol.is_v5()));
    {
        let broker = storing_broker(dir.path(), "");
        for protocol in [V5, V311] {
            alice_leaves_messages(&broker, protocol, &id(protocol));
        }
        let (client, ack) = connect_as(&broker, V5, "anon-stored", None, true);
        assert_eq!(ack.reason_code, ReasonCode::Success);
        client.disconnect();
    }
    let broker = storing_broker(dir.path(), "");
    for protocol in [V5, V311] {
        others_are_refused(&broker, protocol, &id(protocol));
        alice_resumes(&broker, protocol, &id(protocol));
    }
    // An anonymous client's stored session is still not a user's to take.
    refused_as(&broker, V5, "anon-stored", Some("alice"), true);
    resumes_as(&broker, V5, "anon-stored", None);
}

#[test]
fn a_session_another_identity_started_again_is_stored_as_its() {
    let dir = tempfile::tempdir().unwrap();
    {
        // The check off: bob starts alice's client id again (clean start), and keeps it.
        let broker = storing_broker(dir.path(), "client_id_owner_check = false\n");
        alice_leaves_messages(&broker, V5, "handed-over");
        let mut connect = persistent_connect(V5, "handed-over", 600);
        connect.clean_start = true;
        connect.username = Some(s("bob"));
        connect.password = Some(bytes::Bytes::from_static(b"pw-bob"));
        let (bob, ack) = RawClient::connect(broker.addr(), connect);
        assert_eq!(ack.reason_code, ReasonCode::Success);
        assert!(!ack.session_present);
        bob.disconnect();
    }
    // The check on again after a restart: the session is bob's now.
    let broker = storing_broker(dir.path(), "");
    refused_as(&broker, V5, "handed-over", Some("alice"), true);
    resumes_as(&broker, V5, "handed-over", Some("bob"));
}

#[test]
fn a_session_of_an_anonymous_client_is_not_a_users_to_take() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker(dir.path(), "");
    for protocol in [V5, V311] {
        let (client, ack) = connect_as(&broker, protocol, "anon-dev", None, true);
        assert_eq!(ack.reason_code, ReasonCode::Success);
        client.disconnect();
        refused_as(&broker, protocol, "anon-dev", Some("alice"), true);
        // Resumed, then a clean start without expiry: the session ends with the connection,
        // and so does the binding.
        resumes_as(&broker, protocol, "anon-dev", None);
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
    refused_as(&broker, V5, "alice-live", Some("bob"), false);
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
