//! `auth.backends`: logins and topic checks answered by an HTTP service run by the test, a
//! real redis-server and JWTs signed by the test, without blocking the reactor.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::Duration;

use codec::{Packet, ProtocolVersion, QoS, ReasonCode};

use crate::client::{
    Event, RawClient, V5, connect_packet, publish_packet, qos_options, s, subscribe_packet,
};
use crate::harness::TestBroker;
use crate::http_auth_server::{Answer, HttpAuthServer};

const V311: ProtocolVersion = ProtocolVersion::V3_1_1;

/// A CONNECT from `client_id` with `user` and `password`.
fn login_packet(
    protocol: ProtocolVersion,
    client_id: &str,
    user: Option<&str>,
    password: &str,
) -> codec::Connect {
    let mut connect = connect_packet(protocol, client_id, true);
    connect.username = user.map(s);
    connect.password = Some(bytes::Bytes::copy_from_slice(password.as_bytes()));
    connect
}

/// Publishes at QoS 1; the PUBACK's reason.
fn publish_qos1(client: &mut RawClient, topic: &str, payload: &[u8]) -> ReasonCode {
    let id = client.next_packet_id();
    client.publish(publish_packet(topic, payload, QoS::AtLeastOnce, Some(id)))
}

/// A PUBACK reason that accepts the message (5.0 says when nobody subscribed).
fn accepted(reason: ReasonCode) -> bool {
    matches!(
        reason,
        ReasonCode::Success | ReasonCode::NoMatchingSubscribers
    )
}

fn login(broker: &TestBroker, protocol: ProtocolVersion, user: &str, password: &str) -> ReasonCode {
    let connect = login_packet(protocol, "c1", Some(user), password);
    RawClient::connect(broker.addr(), connect).1.reason_code
}

/// A server that lets `alice` in with password `good`.
fn alice_server(delay_for: &'static str, delay: Duration) -> HttpAuthServer {
    HttpAuthServer::start(move |path, body| {
        let user = body["username"].as_str().unwrap_or("");
        let status = match path {
            "/login" if body["password"] == "good" => 200,
            "/acl" if body["topic"].as_str().is_some_and(|t| t.starts_with("ok/")) => 200,
            _ => 403,
        };
        let delay = if user == delay_for {
            delay
        } else {
            Duration::ZERO
        };
        Answer { status, delay }
    })
}

fn http_config(server: &HttpAuthServer, extra: &str) -> String {
    format!(
        "[runtime]\nshards = 1\n[auth]\nbackends = [\"http\"]\n{extra}\n[auth.http]\nlogin_url = {:?}\nacl_url = {:?}\ntimeout_ms = 10000\n",
        server.url("/login"),
        server.url("/acl"),
    )
}

#[test]
fn an_http_backend_decides_logins_on_both_protocol_versions() {
    let server = alice_server("", Duration::ZERO);
    let broker = TestBroker::with_config(&http_config(&server, ""));
    for protocol in [V5, V311] {
        assert_eq!(
            login(&broker, protocol, "alice", "good"),
            ReasonCode::Success
        );
        assert_eq!(
            login(&broker, protocol, "alice", "bad"),
            ReasonCode::BadUserNameOrPassword
        );
        let anonymous = connect_packet(protocol, "anon", true);
        let refused = RawClient::connect(broker.addr(), anonymous).1.reason_code;
        assert_eq!(refused, ReasonCode::NotAuthorized);
    }
}

#[test]
fn a_cached_login_does_not_ask_the_backend_again() {
    let server = alice_server("", Duration::ZERO);
    let broker = TestBroker::with_config(&http_config(&server, ""));
    assert_eq!(login(&broker, V5, "alice", "good"), ReasonCode::Success);
    let asked = server.requests();
    assert_eq!(login(&broker, V5, "alice", "good"), ReasonCode::Success);
    assert_eq!(
        server.requests(),
        asked,
        "the second login came from the cache"
    );
    assert_eq!(
        login(&broker, V5, "alice", "other"),
        ReasonCode::BadUserNameOrPassword
    );
    assert_eq!(server.requests(), asked + 1, "another password is asked");
}

#[test]
fn the_password_file_answers_before_the_http_backend() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("passwd");
    let status = std::process::Command::new("mosquitto_passwd")
        .args(["-c", "-b"])
        .arg(&file)
        .args(["bob", "filepass"])
        .status()
        .expect("mosquitto_passwd runs (install Debian's mosquitto package)");
    assert!(status.success());
    let server = alice_server("", Duration::ZERO);
    let config = format!(
        "[runtime]\nshards = 1\n[auth]\npassword_file = {:?}\nbackends = [\"file\", \"http\"]\n[auth.http]\nlogin_url = {:?}\n",
        file.display().to_string(),
        server.url("/login")
    );
    let broker = TestBroker::with_config(&config);
    assert_eq!(login(&broker, V5, "bob", "filepass"), ReasonCode::Success);
    assert_eq!(server.requests(), 0, "the file let bob in");
    assert_eq!(login(&broker, V5, "alice", "good"), ReasonCode::Success);
    assert_eq!(
        server.requests(),
        1,
        "the file does not know alice: HTTP does"
    );
}

#[test]
fn a_slow_http_backend_does_not_hold_up_other_clients() {
    let server = alice_server("slow", Duration::from_secs(4));
    let broker = TestBroker::with_config(&http_config(&server, ""));
    let mut slow = RawClient::open(broker.addr(), V5);
    slow.send(&Packet::from(login_packet(
        V5,
        "slow",
        Some("slow"),
        "good",
    )));
    // The same (single) shard serves another client end to end meanwhile.
    let mut fast = RawClient::connected(
        broker.addr(),
        login_packet(V5, "fast", Some("fast"), "good"),
    );
    let ack = fast.subscribe_with(subscribe_packet(1, "ok/t", qos_options(QoS::AtLeastOnce)));
    assert_eq!(ack.reason_codes, vec![ReasonCode::GrantedQoS1]);
    let reason = publish_qos1(&mut fast, "ok/t", b"hi");
    assert_eq!(reason, ReasonCode::Success);
    assert_eq!(fast.expect_publish_on("ok/t").payload(), b"hi");
    assert!(
        matches!(slow.next_event(Duration::ZERO), Event::Timeout),
        "the slow login is still waiting for its backend"
    );
    assert_eq!(slow.expect_connack().reason_code, ReasonCode::Success);
}

#[test]
fn logins_beyond_max_pending_are_refused_as_busy() {
    let server = alice_server("alice", Duration::from_secs(3));
    let broker = TestBroker::with_config(&http_config(&server, "max_pending = 1"));
    let mut first = RawClient::open(broker.addr(), V5);
    first.send(&Packet::from(login_packet(
        V5,
        "first",
        Some("alice"),
        "good",
    )));
    crate::harness::wait_until("the first login reaches the backend", || {
        (server.requests() == 1).then_some(())
    });
    let busy = RawClient::connect(
        broker.addr(),
        login_packet(V5, "second", Some("alice"), "other"),
    );
    assert_eq!(busy.1.reason_code, ReasonCode::ServerBusy);
    let busy = RawClient::connect(
        broker.addr(),
        login_packet(V311, "third", Some("alice"), "other"),
    );
    assert_eq!(busy.1.reason_code, ReasonCode::ServerUnavailable);
    assert_eq!(first.expect_connack().reason_code, ReasonCode::Success);
}

#[test]
fn an_unreachable_backend_answers_server_unavailable() {
    let port = crate::ports::free_port();
    let config = format!(
        "[auth]\nbackends = [\"http\"]\n[auth.http]\nlogin_url = \"http://127.0.0.1:{port}/login\"\ntimeout_ms = 500\n"
    );
    let broker = TestBroker::with_config(&config);
    for protocol in [V5, V311] {
        assert_eq!(
            login(&broker, protocol, "alice", "good"),
            ReasonCode::ServerUnavailable
        );
    }
}

#[test]
fn a_login_waiting_for_its_backend_still_meets_the_connect_timeout() {
    let server = alice_server("alice", Duration::from_secs(6));
    let config = format!(
        "[connection]\nconnect_timeout = 1\n{}",
        http_config(&server, "allow_anonymous = true")
    );
    let broker = TestBroker::with_config(&config);
    let mut client = RawClient::open(broker.addr(), V5);
    client.send(&Packet::from(login_packet(V5, "c", Some("alice"), "good")));
    let packets = client.expect_closed();
    assert!(packets.is_empty(), "closed without a CONNACK: {packets:?}");
    broker.assert_serving();
}

#[test]
fn http_topic_checks_decide_publish_and_subscribe_and_are_cached() {
    let server = alice_server("", Duration::ZERO);
    let broker = TestBroker::with_config(&http_config(&server, ""));
    let mut alice = RawClient::connected(
        broker.addr(),
        login_packet(V5, "alice", Some("alice"), "good"),
    );
    let ack = alice.subscribe_with(subscribe_packet(1, "ok/#", qos_options(QoS::AtLeastOnce)));
    assert_eq!(ack.reason_codes, vec![ReasonCode::GrantedQoS1]);
    let ack = alice.subscribe_with(subscribe_packet(2, "no/#", qos_options(QoS::AtLeastOnce)));
    assert_eq!(ack.reason_codes, vec![ReasonCode::NotAuthorized]);
    let refused = publish_qos1(&mut alice, "no/a", b"x");
    assert_eq!(refused, ReasonCode::NotAuthorized);
    let allowed = publish_qos1(&mut alice, "ok/a", b"y");
    assert!(accepted(allowed));
    assert_eq!(alice.expect_publish_on("ok/a").payload(), b"y");
    let asked = server.requests();
    let again = publish_qos1(&mut alice, "ok/a", b"z");
    assert_eq!(again, ReasonCode::Success);
    assert_eq!(
        server.requests(),
        asked,
        "the answer for ok/a came from the cache"
    );
}

/// The `$7$` hash `mosquitto_passwd` writes for `user`/`password`.
fn mosquitto_hash(user: &str, password: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("passwd");
    let status = std::process::Command::new("mosquitto_passwd")
        .args(["-c", "-b"])
        .arg(&file)
        .args([user, password])
        .status()
        .expect("mosquitto_passwd runs (install Debian's mosquitto package)");
    assert!(status.success());
    let line = std::fs::read_to_string(&file).unwrap();
    line.trim().split_once(':').unwrap().1.to_owned()
}

fn redis_config(redis: &crate::redis_server::RedisServer) -> String {
    format!(
        "[runtime]\nshards = 1\n[auth]\nbackends = [\"redis\"]\n[auth.redis]\nurl = {:?}\n",
        redis.url()
    )
}

#[test]
fn redis_users_and_acl_sets_decide_logins_and_topics() {
    let redis = crate::redis_server::RedisServer::start();
    redis.command(&["SET", "alice", &mosquitto_hash("alice", "good")]);
    redis.command(&["SADD", "alice:wacls", "out/%u/#"]);
    redis.command(&["SADD", "alice:racls", "in/%c/#"]);
    redis.command(&["SADD", "common:racls", "public/#"]);
    redis.command(&["SET", "root", &mosquitto_hash("root", "toor")]);
    redis.command(&["SET", "root:su", "true"]);
    let broker = TestBroker::with_config(&redis_config(&redis));
    for protocol in [V5, V311] {
        assert_eq!(
            login(&broker, protocol, "alice", "good"),
            ReasonCode::Success
        );
        assert_eq!(
            login(&broker, protocol, "alice", "bad"),
            ReasonCode::BadUserNameOrPassword
        );
        assert_eq!(
            login(&broker, protocol, "nobody", "good"),
            ReasonCode::BadUserNameOrPassword
        );
    }
    let mut alice = RawClient::connected(
        broker.addr(),
        login_packet(V5, "dev7", Some("alice"), "good"),
    );
    let granted = |alice: &mut RawClient, id, filter| {
        alice
            .subscribe_with(subscribe_packet(id, filter, qos_options(QoS::AtLeastOnce)))
            .reason_codes
    };
    assert_eq!(
        granted(&mut alice, 1, "in/dev7/#"),
        vec![ReasonCode::GrantedQoS1]
    );
    assert_eq!(
        granted(&mut alice, 2, "public/news"),
        vec![ReasonCode::GrantedQoS1]
    );
    assert_eq!(
        granted(&mut alice, 3, "in/dev8/#"),
        vec![ReasonCode::NotAuthorized]
    );
    let allowed = publish_qos1(&mut alice, "out/alice/t", b"x");
    assert!(accepted(allowed));
    let refused = publish_qos1(&mut alice, "out/bob/t", b"x");
    assert_eq!(refused, ReasonCode::NotAuthorized);
    let mut root = RawClient::connected(broker.addr(), login_packet(V5, "r", Some("root"), "toor"));
    let anything = publish_qos1(&mut root, "in/dev7/cmd", b"go");
    assert!(accepted(anything), "a superuser may publish anywhere");
    assert_eq!(alice.expect_publish_on("in/dev7/cmd").payload(), b"go");
}

#[test]
fn a_redis_server_that_is_down_answers_server_unavailable() {
    let mut redis = crate::redis_server::RedisServer::start();
    let config = redis_config(&redis).replace("[auth]\n", "[auth]\nallow_anonymous = true\n");
    let broker = TestBroker::with_config(&config);
    redis.stop();
    for protocol in [V5, V311] {
        assert_eq!(
            login(&broker, protocol, "alice", "good"),
            ReasonCode::ServerUnavailable
        );
    }
    broker.assert_serving();
}

/// What a subscriber whose subscription a reload revoked sees: `writer` publishes to
/// `public/x`; `control` (still allowed) gets it, `revoked` gets nothing, the revocation having
/// been counted once first; a new SUBSCRIBE to `public/#` is refused too.
fn assert_revoked_after_reload(
    broker: &TestBroker,
    revoked: &mut RawClient,
    control: &mut RawClient,
    writer: &mut RawClient,
) {
    let before = broker.metrics().subscriptions_revoked;
    assert_eq!(broker.reload(), Vec::<String>::new());
    broker.wait_for_metrics(
        "the reloaded backend's refusal revokes the subscription",
        |m| m.subscriptions_revoked > before,
    );
    assert!(accepted(publish_qos1(writer, "public/x", b"after")));
    assert_eq!(control.expect_publish_acked().payload(), b"after");
    revoked.expect_silence(Duration::from_millis(300));
    assert_eq!(
        broker.metrics().subscriptions_revoked - before,
        1,
        "only the refused subscription is revoked, the control's stays"
    );
    let again = revoked.subscribe_with(subscribe_packet(
        9,
        "public/#",
        qos_options(QoS::AtLeastOnce),
    ));
    assert_eq!(again.reason_codes, vec![ReasonCode::NotAuthorized]);
}

/// Both subscribers get a message on `public/x` (their subscriptions stand).
fn assert_both_receive(bob: &mut RawClient, carol: &mut RawClient, writer: &mut RawClient) {
    assert!(accepted(publish_qos1(writer, "public/x", b"before")));
    assert_eq!(bob.expect_publish_acked().payload(), b"before");
    assert_eq!(carol.expect_publish_acked().payload(), b"before");
}

/// Issue 47, defect 3: an HTTP `acl_url` that now refuses a subscription it allowed reaches
/// the subscription at the next reload (the backend is asked again about each filter).
#[test]
fn an_http_acl_change_reaches_existing_subscriptions_after_a_reload() {
    let bob_may_read = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let may_read = std::sync::Arc::clone(&bob_may_read);
    let server = HttpAuthServer::start(move |path, body| {
        let bob = body["username"] == "bob";
        let status = match path {
            "/login" => 200,
            "/acl" if !bob || may_read.load(std::sync::atomic::Ordering::Acquire) => 200,
            _ => 403,
        };
        Answer {
            status,
            delay: Duration::ZERO,
        }
    });
    let broker = TestBroker::with_config(&http_config(&server, ""));
    let connected =
        |id, user| RawClient::connected(broker.addr(), login_packet(V5, id, Some(user), "pw"));
    let (mut bob, mut carol, mut writer) = (
        connected("b", "bob"),
        connected("c", "carol"),
        connected("w", "writer"),
    );
    for subscriber in [&mut bob, &mut carol] {
        let ack = subscriber.subscribe_with(subscribe_packet(
            1,
            "public/#",
            qos_options(QoS::AtLeastOnce),
        ));
        assert_eq!(ack.reason_codes, vec![ReasonCode::GrantedQoS1]);
    }
    assert_both_receive(&mut bob, &mut carol, &mut writer);
    bob_may_read.store(false, std::sync::atomic::Ordering::Release);
    assert_revoked_after_reload(&broker, &mut bob, &mut carol, &mut writer);
}

/// Issue 47, defect 3: a Redis ACL set changed behind a connected client reaches its
/// subscriptions at the next reload (its grant is read again).
#[test]
fn a_redis_acl_change_reaches_existing_subscriptions_after_a_reload() {
    let redis = crate::redis_server::RedisServer::start();
    let hash = mosquitto_hash("user", "pw");
    for user in ["bob", "carol"] {
        redis.command(&["SET", user, &hash]);
        redis.command(&["SADD", &format!("{user}:racls"), "public/#"]);
    }
    redis.command(&["SET", "writer", &hash]);
    redis.command(&["SADD", "writer:wacls", "public/#"]);
    let broker = TestBroker::with_config(&redis_config(&redis));
    let connected =
        |id, user| RawClient::connected(broker.addr(), login_packet(V5, id, Some(user), "pw"));
    let (mut bob, mut carol, mut writer) = (
        connected("b", "bob"),
        connected("c", "carol"),
        connected("w", "writer"),
    );
    for subscriber in [&mut bob, &mut carol] {
        let ack = subscriber.subscribe_with(subscribe_packet(
            1,
            "public/#",
            qos_options(QoS::AtLeastOnce),
        ));
        assert_eq!(ack.reason_codes, vec![ReasonCode::GrantedQoS1]);
    }
    assert_both_receive(&mut bob, &mut carol, &mut writer);
    redis.command(&["SREM", "bob:racls", "public/#"]);
    assert_revoked_after_reload(&broker, &mut bob, &mut carol, &mut writer);
}

/// An HS256 token for `sub` expiring `expires_in` from now, with topic claims.
fn hs256_token(
    secret: &[u8],
    sub: &str,
    expires_in: Duration,
    publish: &[&str],
    subscribe: &[&str],
) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let claims = serde_json::json!({
        "sub": sub,
        "exp": (now + expires_in).as_secs(),
        "publish": publish,
        "subscribe": subscribe,
    });
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(secret),
    )
    .unwrap()
}

fn jwt_broker(secret: &[u8]) -> (TestBroker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("jwt.secret");
    std::fs::write(&file, secret).unwrap();
    let config = format!(
        "[runtime]\nshards = 1\n[auth]\nbackends = [\"jwt\"]\n[auth.jwt]\nhs256_secret_file = {:?}\nusername_claim = \"sub\"\n",
        file.display().to_string()
    );
    (TestBroker::with_config(&config), dir)
}

#[test]
fn a_jwt_logs_in_carries_its_topics_and_is_refused_when_forged() {
    let secret = b"test-secret-0123456789abcdef";
    let (broker, _dir) = jwt_broker(secret);
    let token = hs256_token(
        secret,
        "dev1",
        Duration::from_secs(600),
        &["dev/1/#"],
        &["cmd/1"],
    );
    let forged = hs256_token(
        b"another-secret-entirely!!",
        "dev1",
        Duration::from_secs(600),
        &["#"],
        &["#"],
    );
    let expired = hs256_token(secret, "dev1", Duration::ZERO, &[], &[]);
    for protocol in [V5, V311] {
        assert_eq!(
            login(&broker, protocol, "dev1", &token),
            ReasonCode::Success
        );
        assert_eq!(
            login(&broker, protocol, "dev2", &token),
            ReasonCode::BadUserNameOrPassword,
            "the sub claim names another user"
        );
        assert_eq!(
            login(&broker, protocol, "dev1", &forged),
            ReasonCode::BadUserNameOrPassword
        );
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(
            login(&broker, protocol, "dev1", &expired),
            ReasonCode::BadUserNameOrPassword
        );
    }
    let mut device =
        RawClient::connected(broker.addr(), login_packet(V5, "d1", Some("dev1"), &token));
    let ack = device.subscribe_with(subscribe_packet(1, "cmd/1", qos_options(QoS::AtLeastOnce)));
    assert_eq!(ack.reason_codes, vec![ReasonCode::GrantedQoS1]);
    let ack = device.subscribe_with(subscribe_packet(2, "cmd/2", qos_options(QoS::AtLeastOnce)));
    assert_eq!(ack.reason_codes, vec![ReasonCode::NotAuthorized]);
    let allowed = publish_qos1(&mut device, "dev/1/temp", b"21");
    assert!(accepted(allowed));
    let refused = publish_qos1(&mut device, "dev/2/temp", b"21");
    assert_eq!(refused, ReasonCode::NotAuthorized);
}

#[test]
fn a_client_is_disconnected_when_its_jwt_expires() {
    let secret = b"test-secret-0123456789abcdef";
    let (broker, _dir) = jwt_broker(secret);
    let token = hs256_token(secret, "dev1", Duration::from_secs(3), &["dev/1/#"], &[]);
    let mut v5 = RawClient::connected(broker.addr(), login_packet(V5, "a", Some("dev1"), &token));
    let mut v311 =
        RawClient::connected(broker.addr(), login_packet(V311, "b", Some("dev1"), &token));
    v5.expect_disconnect(ReasonCode::MaximumConnectTime);
    let packets = v311.expect_closed();
    assert!(
        packets.is_empty(),
        "3.1.1 has no DISCONNECT from the server: {packets:?}"
    );
}

/// A CONNECT waiting for its backend counts against the bytes clients that have not logged in
/// may make the broker hold (`limits.max_partial_frame_bytes`): beyond them the next one is
/// refused with 0x97, and a login that ended gives its share back.
#[test]
fn logins_waiting_for_a_backend_share_the_pre_login_budget() {
    let server = alice_server("alice", Duration::from_secs(2));
    let limits = "\n[limits]\nmax_packet_size = 3072\nmax_connect_size = 3072\n\
                  max_partial_frame_bytes = 4096\n";
    let broker = TestBroker::with_config(&(http_config(&server, "") + limits));
    let heavy = |client_id: &str, user: &str| {
        let mut connect = login_packet(V5, client_id, Some(user), "good");
        connect.will = Some(codec::Will {
            topic: s("ok/will"),
            payload: bytes::Bytes::from(vec![b'w'; 2200]),
            qos: QoS::AtMostOnce,
            retain: false,
            properties: Default::default(),
        });
        connect
    };
    let mut first = RawClient::open(broker.addr(), V5);
    first.send(&Packet::from(heavy("first", "alice")));
    crate::harness::wait_until("the first login reaches the backend", || {
        (server.requests() == 1).then_some(())
    });
    let refused = RawClient::connect(broker.addr(), heavy("second", "bob"));
    assert_eq!(refused.1.reason_code, ReasonCode::QuotaExceeded);
    assert_eq!(first.expect_connack().reason_code, ReasonCode::Success);
    let admitted = RawClient::connect(broker.addr(), heavy("third", "bob"));
    assert_eq!(admitted.1.reason_code, ReasonCode::Success);
}
