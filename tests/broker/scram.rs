//! MQTT 5 enhanced authentication with SCRAM-SHA-256/512 (`[auth.scram]`): the AUTH exchange at
//! CONNECT and re-authentication, against credentials written by `ringmq scram add`, with the
//! test's own SCRAM client (`scram_client.rs`).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use codec::{Auth, AuthProperties, ConnAck, Connect, Packet, QoS, ReasonCode};

use crate::client::{RawClient, V5, connect_packet, qos_options, s, subscribe_packet};
use crate::harness::TestBroker;
use crate::scram_client::{Hash, ScramClient};

/// Adds `user` to `file` with `ringmq scram add`, the password on standard input.
pub fn add_user(file: &Path, user: &str, password: &str, hash: Hash) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["scram", "add", "--file"])
        .arg(file)
        .args(["--user", user, "--mechanism", hash.method()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    assert!(child.wait().unwrap().success(), "ringmq scram add");
}

/// A broker with `[auth.scram]` over `dir/scram` and an ACL giving each user `users/<name>/#`;
/// `auth_keys` go in `[auth]`, `extra` after `[auth.scram]`'s keys.
pub fn scram_broker(dir: &Path, auth_keys: &str, extra: &str) -> TestBroker {
    let acl = dir.join("acl");
    std::fs::write(&acl, "pattern readwrite users/%u/#\n").unwrap();
    TestBroker::with_config(&format!(
        "[auth]\nacl_file = {:?}\n{auth_keys}\n[auth.scram]\nfile = {:?}\n{extra}",
        acl.display().to_string(),
        dir.join("scram").display().to_string()
    ))
}

/// A 5.0 CONNECT naming `method` with `data`.
pub fn auth_connect(client_id: &str, method: &str, data: Vec<u8>) -> Connect {
    let mut connect = connect_packet(V5, client_id, true);
    connect.properties.authentication_method = Some(s(method));
    connect.properties.authentication_data = Some(Bytes::from(data));
    connect
}

pub fn auth_packet(reason: ReasonCode, method: &str, data: Vec<u8>) -> Packet {
    Packet::Auth(Auth {
        reason_code: reason,
        properties: AuthProperties {
            authentication_method: Some(s(method)),
            authentication_data: Some(Bytes::from(data)),
            ..AuthProperties::default()
        },
    })
}

/// The next packet, which must be AUTH `reason` naming `method`: its data.
pub fn expect_auth(client: &mut RawClient, reason: ReasonCode, method: &str) -> Bytes {
    match client.recv() {
        Packet::Auth(auth) => {
            assert_eq!(auth.reason_code, reason, "AUTH reason");
            assert_eq!(auth.properties.authentication_method, Some(s(method)));
            auth.properties.authentication_data.unwrap_or_default()
        }
        other => panic!("expected AUTH {}, got {other:?}", reason.name()),
    }
}

/// Sends CONNECT with client-first and reads server-first (AUTH 0x18).
pub fn begin(broker: &TestBroker, scram: &ScramClient, hash: Hash, id: &str) -> (RawClient, Bytes) {
    let mut client = RawClient::open(broker.addr(), V5);
    client.send(&Packet::from(auth_connect(
        id,
        hash.method(),
        scram.client_first(),
    )));
    let server_first = expect_auth(
        &mut client,
        ReasonCode::ContinueAuthentication,
        hash.method(),
    );
    (client, server_first)
}

/// A whole SCRAM CONNECT as `user`: the client, its SCRAM state and the CONNACK.
pub fn scram_connect(
    broker: &TestBroker,
    hash: Hash,
    (user, password): (&str, &str),
    id: &str,
) -> (RawClient, ScramClient, ConnAck) {
    let mut scram = ScramClient::new(hash, user, password);
    let (mut client, server_first) = begin(broker, &scram, hash, id);
    let client_final = scram.client_final(&server_first);
    client.send(&auth_packet(
        ReasonCode::ContinueAuthentication,
        hash.method(),
        client_final,
    ));
    let connack = client.expect_connack();
    (client, scram, connack)
}

fn users(dir: &Path) {
    let file = dir.join("scram");
    add_user(&file, "alice", "wonderland", Hash::Sha256);
    add_user(&file, "alice", "wonderland-512", Hash::Sha512);
    add_user(&file, "bob", "builder", Hash::Sha256);
}

#[test]
fn sha256_and_sha512_logins_succeed_and_the_server_proves_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    users(dir.path());
    let text = std::fs::read_to_string(dir.path().join("scram")).unwrap();
    assert!(!text.contains("wonderland"), "the password is never stored");
    let broker = scram_broker(dir.path(), "", "");
    for (hash, password) in [
        (Hash::Sha256, "wonderland"),
        (Hash::Sha512, "wonderland-512"),
    ] {
        let (mut client, scram, connack) =
            scram_connect(&broker, hash, ("alice", password), "alice-device");
        assert_eq!(connack.reason_code, ReasonCode::Success, "{hash:?}");
        let props = &connack.properties;
        assert_eq!(props.authentication_method, Some(s(hash.method())));
        let server_final = props.authentication_data.clone().unwrap();
        assert!(
            scram.server_final_valid(&server_final),
            "{hash:?}: server-final"
        );
        // The SCRAM user is the session's user: %u of the ACL is "alice".
        let id = client.next_packet_id();
        let mut subscribe = subscribe_packet(id, "users/alice/#", qos_options(QoS::AtMostOnce));
        subscribe
            .filters
            .push((s("users/bob/#"), qos_options(QoS::AtMostOnce)));
        let ack = client.subscribe_with(subscribe);
        assert_eq!(
            ack.reason_codes,
            vec![
                ReasonCode::granted(QoS::AtMostOnce),
                ReasonCode::NotAuthorized
            ]
        );
        client.disconnect();
    }
}

#[test]
fn wrong_passwords_unknown_users_and_bad_messages_get_0x87() {
    let dir = tempfile::tempdir().unwrap();
    users(dir.path());
    let broker = scram_broker(dir.path(), "", "");
    let logins = [
        (Hash::Sha256, "alice", "guess"),
        (Hash::Sha512, "alice", "wonderland"),
        (Hash::Sha256, "mallory", "anything"),
        (Hash::Sha512, "bob", "builder"),
    ];
    for (hash, user, password) in logins {
        let (mut client, _, connack) = scram_connect(&broker, hash, (user, password), "guess");
        assert_eq!(
            connack.reason_code,
            ReasonCode::NotAuthorized,
            "{user} {hash:?}"
        );
        client.expect_closed();
    }
    for client_first in [
        &b"p=tls-unique,,n=alice,r=abc"[..],
        b"n,,r=abc",
        b"\xff\xfe",
    ] {
        let connect = auth_connect("bad", "SCRAM-SHA-256", client_first.to_vec());
        let (mut client, connack) = RawClient::connect(broker.addr(), connect);
        assert_eq!(connack.reason_code, ReasonCode::NotAuthorized);
        client.expect_closed();
    }
    let login = ("alice", "wonderland");
    let (_, _, connack) = scram_connect(&broker, Hash::Sha256, login, "after");
    assert_eq!(connack.reason_code, ReasonCode::Success, "still serving");
}

#[test]
fn an_unknown_method_gets_0x8c_at_once() {
    let dir = tempfile::tempdir().unwrap();
    users(dir.path());
    let broker = scram_broker(dir.path(), "", "mechanisms = [\"SCRAM-SHA-256\"]\n");
    for method in ["SCRAM-SHA-1", "SCRAM-SHA-512", "scram-sha-256"] {
        let connect = auth_connect("m", method, b"n,,n=alice,r=abc".to_vec());
        let (mut client, connack) = RawClient::connect(broker.addr(), connect);
        assert_eq!(
            connack.reason_code,
            ReasonCode::BadAuthenticationMethod,
            "{method}"
        );
        client.expect_closed();
    }
}

#[test]
fn only_auth_is_accepted_during_the_exchange() {
    let dir = tempfile::tempdir().unwrap();
    users(dir.path());
    let broker = scram_broker(dir.path(), "", "");
    let scram = ScramClient::new(Hash::Sha256, "alice", "wonderland");
    let (mut client, _) = begin(&broker, &scram, Hash::Sha256, "eager");
    let subscribe = subscribe_packet(1, "users/alice/#", qos_options(QoS::AtMostOnce));
    client.send(&Packet::Subscribe(subscribe));
    let before = client.expect_closed();
    assert!(
        matches!(before.as_slice(), [Packet::ConnAck(ack)] if ack.reason_code == ReasonCode::ProtocolError),
        "{before:?}"
    );
    // AUTH with another method, and AUTH 0x19 during the CONNECT's exchange.
    for (reason, method) in [
        (ReasonCode::ContinueAuthentication, "SCRAM-SHA-512"),
        (ReasonCode::ReAuthenticate, "SCRAM-SHA-256"),
    ] {
        let (mut client, _) = begin(&broker, &scram, Hash::Sha256, "confused");
        client.send(&auth_packet(reason, method, b"c=biws".to_vec()));
        let before = client.expect_closed();
        assert!(
            matches!(before.as_slice(), [Packet::ConnAck(ack)] if ack.reason_code == ReasonCode::ProtocolError),
            "{before:?}"
        );
    }
}

#[test]
fn an_exchange_left_unanswered_meets_the_connect_timeout() {
    let dir = tempfile::tempdir().unwrap();
    users(dir.path());
    let broker = scram_broker(dir.path(), "", "[connection]\nconnect_timeout = 1\n");
    let scram = ScramClient::new(Hash::Sha256, "alice", "wonderland");
    let (mut client, _) = begin(&broker, &scram, Hash::Sha256, "slow");
    let started = std::time::Instant::now();
    client.expect_closed();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "closed by the CONNECT timeout"
    );
}

/// Re-authentication (AUTH 0x19) of a connected SCRAM client: client-final's reply.
pub fn reauthenticate(
    client: &mut RawClient,
    hash: Hash,
    user: &str,
    password: &str,
) -> ScramClient {
    let mut scram = ScramClient::new(hash, user, password);
    client.send(&auth_packet(
        ReasonCode::ReAuthenticate,
        hash.method(),
        scram.client_first(),
    ));
    let server_first = expect_auth(client, ReasonCode::ContinueAuthentication, hash.method());
    let client_final = scram.client_final(&server_first);
    client.send(&auth_packet(
        ReasonCode::ContinueAuthentication,
        hash.method(),
        client_final,
    ));
    scram
}

#[test]
fn reauthentication_succeeds_with_auth_0x00_and_fails_with_disconnect_0x87() {
    let dir = tempfile::tempdir().unwrap();
    users(dir.path());
    let broker = scram_broker(dir.path(), "", "");
    let login = ("alice", "wonderland");
    let (mut client, _, connack) = scram_connect(&broker, Hash::Sha256, login, "re");
    assert_eq!(connack.reason_code, ReasonCode::Success);
    client.subscribe("users/alice/news", QoS::AtMostOnce);
    for _ in 0..2 {
        let scram = reauthenticate(&mut client, Hash::Sha256, "alice", "wonderland");
        let server_final = expect_auth(&mut client, ReasonCode::Success, "SCRAM-SHA-256");
        assert!(scram.server_final_valid(&server_final));
    }
    // The session went on: its subscription still delivers.
    client.publish_simple("users/alice/news", b"still here", QoS::AtMostOnce);
    assert_eq!(client.expect_publish().payload(), b"still here");
    reauthenticate(&mut client, Hash::Sha256, "alice", "wrong");
    client.expect_disconnect(ReasonCode::NotAuthorized);

    // Re-authenticating as another user is refused too.
    let (mut client, _, _) = scram_connect(&broker, Hash::Sha256, login, "re2");
    reauthenticate(&mut client, Hash::Sha256, "bob", "builder");
    client.expect_disconnect(ReasonCode::NotAuthorized);
}

#[test]
fn auth_with_another_method_or_without_one_is_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    users(dir.path());
    let broker = scram_broker(dir.path(), "allow_anonymous = true", "");
    let (mut client, _, _) = scram_connect(&broker, Hash::Sha256, ("alice", "wonderland"), "m");
    let scram = ScramClient::new(Hash::Sha512, "alice", "wonderland-512");
    client.send(&auth_packet(
        ReasonCode::ReAuthenticate,
        "SCRAM-SHA-512",
        scram.client_first(),
    ));
    client.expect_disconnect(ReasonCode::ProtocolError);

    let (mut client, _, _) = scram_connect(&broker, Hash::Sha256, ("alice", "wonderland"), "m");
    client.send(&auth_packet(
        ReasonCode::ContinueAuthentication,
        "SCRAM-SHA-256",
        vec![],
    ));
    client.expect_disconnect(ReasonCode::ProtocolError);

    let mut plain = RawClient::connected_clean(broker.addr(), V5, "plain");
    plain.send(&auth_packet(
        ReasonCode::ReAuthenticate,
        "SCRAM-SHA-256",
        vec![],
    ));
    plain.expect_disconnect(ReasonCode::ProtocolError);
}

#[test]
fn users_added_later_log_in_after_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    users(dir.path());
    let broker = scram_broker(dir.path(), "", "");
    let carol = ("carol", "singer");
    let (_, _, connack) = scram_connect(&broker, Hash::Sha512, carol, "carol");
    assert_eq!(connack.reason_code, ReasonCode::NotAuthorized);
    add_user(&dir.path().join("scram"), "carol", "singer", Hash::Sha512);
    assert_eq!(broker.reload(), Vec::<String>::new());
    let (_, _, connack) = scram_connect(&broker, Hash::Sha512, carol, "carol");
    assert_eq!(connack.reason_code, ReasonCode::Success);
}

/// A CONNECT held through its AUTH exchange counts against the bytes clients that have not
/// logged in may make the broker hold (`limits.max_partial_frame_bytes`): beyond them the next
/// exchange is refused with 0x97, and a closed one gives its share back.
#[test]
fn exchanges_waiting_for_their_client_share_the_pre_login_budget() {
    let dir = tempfile::tempdir().unwrap();
    users(dir.path());
    let limits = "[limits]\nmax_packet_size = 3072\nmax_connect_size = 3072\n\
                  max_partial_frame_bytes = 4096\n";
    let broker = scram_broker(dir.path(), "", limits);
    let heavy_begin = |id: &str| {
        let scram = ScramClient::new(Hash::Sha256, "alice", "wonderland");
        let mut connect = auth_connect(id, Hash::Sha256.method(), scram.client_first());
        connect.will = Some(codec::Will {
            topic: s("users/alice/will"),
            payload: Bytes::from(vec![b'w'; 1200]),
            qos: codec::QoS::AtMostOnce,
            retain: false,
            properties: Default::default(),
        });
        let mut client = RawClient::open(broker.addr(), V5);
        client.send(&Packet::from(connect));
        client
    };
    let mut first = heavy_begin("held-1");
    expect_auth(
        &mut first,
        ReasonCode::ContinueAuthentication,
        Hash::Sha256.method(),
    );
    let mut second = heavy_begin("held-2");
    assert_eq!(
        second.expect_connack().reason_code,
        ReasonCode::QuotaExceeded
    );
    first.drop_abruptly();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut third = heavy_begin("held-3");
        match third.recv() {
            Packet::Auth(auth) => {
                assert_eq!(auth.reason_code, ReasonCode::ContinueAuthentication);
                break;
            }
            Packet::ConnAck(ack) if ack.reason_code == ReasonCode::QuotaExceeded => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the first exchange's share never came back"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            other => panic!("expected AUTH or CONNACK 0x97, got {other:?}"),
        }
    }
}
