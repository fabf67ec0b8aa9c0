//! The AUTH exchange through the auth workers: SCRAM credentials kept in a real redis-server
//! (`[auth.scram] store = "redis"`), and a custom method driven round by round by an HTTP
//! service run by the test (`[auth.http] auth_exchange_url`).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use codec::{Packet, QoS, ReasonCode};
use serde_json::json;

use crate::client::{RawClient, V5, qos_options, s, subscribe_packet};
use crate::harness::TestBroker;
use crate::http_auth_server::HttpAuthServer;
use crate::redis_server::RedisServer;
use crate::scram::{
    add_user, auth_connect, auth_packet, expect_auth, reauthenticate, scram_connect,
};
use crate::scram_client::{Hash, ScramClient};

/// Stores `user`'s credential in Redis as `HSET <user>:scram <MECHANISM> <rest of the line>`,
/// the line written by `ringmq scram add`.
fn redis_user(redis: &RedisServer, dir: &Path, (user, password): (&str, &str), hash: Hash) {
    let file = dir.join(format!("{user}-{}", hash.method()));
    add_user(&file, user, password, hash);
    let line = std::fs::read_to_string(&file).unwrap();
    let rest = line.trim().strip_prefix(&format!("{user}:")).unwrap();
    let (mechanism, value) = rest.split_once(':').unwrap();
    redis.command(&["HSET", &format!("{user}:scram"), mechanism, value]);
}

fn granted_and_refused(client: &mut RawClient, granted: &str, refused: &str) {
    let id = client.next_packet_id();
    let mut subscribe = subscribe_packet(id, granted, qos_options(QoS::AtMostOnce));
    subscribe
        .filters
        .push((s(refused), qos_options(QoS::AtMostOnce)));
    let ack = client.subscribe_with(subscribe);
    assert_eq!(
        ack.reason_codes,
        vec![
            ReasonCode::granted(QoS::AtMostOnce),
            ReasonCode::NotAuthorized
        ]
    );
}

#[test]
fn scram_credentials_in_redis_log_in_under_the_users_redis_acl() {
    let mut redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    redis_user(&redis, dir.path(), ("dave", "s3cret"), Hash::Sha512);
    redis_user(&redis, dir.path(), ("dave", "s3cret-256"), Hash::Sha256);
    redis.command(&["SADD", "dave:rwacls", "dave/#"]);
    let broker = TestBroker::with_config(&format!(
        "[auth]\nbackends = [\"redis\"]\n[auth.redis]\nurl = {:?}\n[auth.scram]\nstore = \"redis\"\n",
        redis.url()
    ));
    for (hash, password) in [(Hash::Sha512, "s3cret"), (Hash::Sha256, "s3cret-256")] {
        let (mut client, scram, connack) = scram_connect(&broker, hash, ("dave", password), "d");
        assert_eq!(connack.reason_code, ReasonCode::Success, "{hash:?}");
        let server_final = connack.properties.authentication_data.clone().unwrap();
        assert!(scram.server_final_valid(&server_final));
        // The Redis ACL sets of the user apply.
        granted_and_refused(&mut client, "dave/inbox", "erin/inbox");
        // Re-authentication asks Redis again.
        let scram = reauthenticate(&mut client, hash, "dave", password);
        let server_final = expect_auth(&mut client, ReasonCode::Success, hash.method());
        assert!(scram.server_final_valid(&server_final));
        client.disconnect();
    }
    for (user, password) in [("dave", "guess"), ("nobody", "s3cret")] {
        let (mut client, _, connack) = scram_connect(&broker, Hash::Sha512, (user, password), "x");
        assert_eq!(connack.reason_code, ReasonCode::NotAuthorized, "{user}");
        client.expect_closed();
    }
    redis.stop();
    let scram = ScramClient::new(Hash::Sha512, "dave", "s3cret");
    let connect = auth_connect("d", Hash::Sha512.method(), scram.client_first());
    let (_, connack) = RawClient::connect(broker.addr(), connect);
    assert_eq!(connack.reason_code, ReasonCode::ServerUnavailable);
}

/// The test's exchange service: method TWO-STEP wants "hello", then "answer-1" to
/// "challenge-1", then "answer-2" to "challenge-2", and names the user "erin"; LOOP always
/// continues.
fn exchange_server() -> HttpAuthServer {
    HttpAuthServer::start_json(|path, body| {
        let data = body["data"]
            .as_str()
            .map(|d| String::from_utf8(BASE64.decode(d).unwrap()).unwrap());
        let step = (
            body["method"].as_str(),
            body["round"].as_u64(),
            body["state"].as_str(),
        );
        let continue_with = |data: &str, state: &str| json!({"result": "continue", "data": BASE64.encode(data), "state": state});
        match (path, step, data.as_deref()) {
            ("/exchange", (Some("LOOP"), _, _), _) => continue_with("again", "loop"),
            ("/exchange", (Some("TWO-STEP"), Some(0), None), Some("hello")) => {
                continue_with("challenge-1", "s1")
            }
            ("/exchange", (Some("TWO-STEP"), Some(1), Some("s1")), Some("answer-1")) => {
                continue_with("challenge-2", "s2")
            }
            ("/exchange", (Some("TWO-STEP"), Some(2), Some("s2")), Some("answer-2")) => {
                json!({"result": "success", "data": BASE64.encode("welcome"), "username": "erin"})
            }
            _ => json!({"result": "deny"}),
        }
    })
}

fn http_broker(server: &HttpAuthServer, dir: &Path) -> TestBroker {
    let acl = dir.join("acl");
    std::fs::write(&acl, "pattern readwrite users/%u/#\n").unwrap();
    TestBroker::with_config(&format!(
        "[auth]\nbackends = [\"http\"]\nacl_file = {:?}\n[auth.http]\nlogin_url = {:?}\n\
         auth_exchange_url = {:?}\nauth_methods = [\"TWO-STEP\", \"LOOP\"]\ntimeout_ms = 10000\n",
        acl.display().to_string(),
        server.url("/login"),
        server.url("/exchange"),
    ))
}

/// Sends AUTH 0x18 TWO-STEP `data`.
fn answer(client: &mut RawClient, method: &str, data: &str) {
    let packet = auth_packet(ReasonCode::ContinueAuthentication, method, data.into());
    client.send(&packet);
}

#[test]
fn an_http_service_drives_a_custom_method_at_connect_and_reauthentication() {
    let server = exchange_server();
    let dir = tempfile::tempdir().unwrap();
    let broker = http_broker(&server, dir.path());
    let mut client = RawClient::open(broker.addr(), V5);
    client.send(&Packet::from(auth_connect(
        "e",
        "TWO-STEP",
        b"hello".to_vec(),
    )));
    let method = "TWO-STEP";
    let challenge = expect_auth(&mut client, ReasonCode::ContinueAuthentication, method);
    assert_eq!(&challenge[..], b"challenge-1");
    answer(&mut client, method, "answer-1");
    let challenge = expect_auth(&mut client, ReasonCode::ContinueAuthentication, method);
    assert_eq!(&challenge[..], b"challenge-2");
    answer(&mut client, method, "answer-2");
    let connack = client.expect_connack();
    assert_eq!(connack.reason_code, ReasonCode::Success);
    assert_eq!(connack.properties.authentication_method, Some(s(method)));
    assert_eq!(
        connack.properties.authentication_data.as_deref(),
        Some(&b"welcome"[..])
    );
    // The user the service named owns the session: %u is "erin".
    granted_and_refused(&mut client, "users/erin/#", "users/frank/#");

    client.send(&auth_packet(
        ReasonCode::ReAuthenticate,
        method,
        b"hello".to_vec(),
    ));
    expect_auth(&mut client, ReasonCode::ContinueAuthentication, method);
    answer(&mut client, method, "answer-1");
    expect_auth(&mut client, ReasonCode::ContinueAuthentication, method);
    answer(&mut client, method, "answer-2");
    let done = expect_auth(&mut client, ReasonCode::Success, method);
    assert_eq!(&done[..], b"welcome");
    client.ping();

    client.send(&auth_packet(
        ReasonCode::ReAuthenticate,
        method,
        b"hello".to_vec(),
    ));
    expect_auth(&mut client, ReasonCode::ContinueAuthentication, method);
    answer(&mut client, method, "wrong");
    client.expect_disconnect(ReasonCode::NotAuthorized);
}

#[test]
fn http_exchanges_are_refused_on_a_wrong_answer_an_unknown_method_and_too_many_rounds() {
    let server = exchange_server();
    let dir = tempfile::tempdir().unwrap();
    let broker = http_broker(&server, dir.path());
    let connect = auth_connect("e", "TWO-STEP", b"goodbye".to_vec());
    let (mut client, connack) = RawClient::connect(broker.addr(), connect);
    assert_eq!(connack.reason_code, ReasonCode::NotAuthorized);
    client.expect_closed();

    let connect = auth_connect("e", "OTHER", b"hello".to_vec());
    let (mut client, connack) = RawClient::connect(broker.addr(), connect);
    assert_eq!(connack.reason_code, ReasonCode::BadAuthenticationMethod);
    client.expect_closed();

    let mut client = RawClient::open(broker.addr(), V5);
    client.send(&Packet::from(auth_connect(
        "loop",
        "LOOP",
        b"start".to_vec(),
    )));
    expect_auth(&mut client, ReasonCode::ContinueAuthentication, "LOOP");
    for _ in 0..10 {
        answer(&mut client, "LOOP", "more");
        expect_auth(&mut client, ReasonCode::ContinueAuthentication, "LOOP");
    }
    answer(&mut client, "LOOP", "more");
    let connack = client.expect_connack();
    assert_eq!(
        connack.reason_code,
        ReasonCode::NotAuthorized,
        "the 11th AUTH is refused"
    );
    client.expect_closed();
}
