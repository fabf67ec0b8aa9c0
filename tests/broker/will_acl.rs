//! Wills pass the checks a PUBLISH on their topic would (the ACL file, the backend's topic
//! answers, the authorization hook, the `$SYS` block): a will the client may not publish
//! refuses its CONNECT (5.0: CONNACK 0x87; 3.1.1: return code 5), and a will the rules no
//! longer allow when it fires (reloaded since CONNECT) is dropped. Both are counted.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use codec::{Connect, ProtocolVersion, QoS, ReasonCode};

use crate::client::{QUIET, RawClient, V5, V311, connect_packet, s};
use crate::harness::TestBroker;
use crate::http_auth_server::{Answer, HttpAuthServer};

/// alice may write under `alice/`; bob reads `bob/#` and `alice/status`.
const ACL: &str = "\
user alice
topic readwrite alice/#

user bob
topic read bob/#
topic read alice/status
";

fn broker_with(acl: &Path, text: &str) -> TestBroker {
    std::fs::write(acl, text).unwrap();
    TestBroker::with_config(&format!(
        "[auth]\nacl_file = {:?}\n",
        acl.display().to_string()
    ))
}

/// A CONNECT from `id` as `user` (no password file: the name is taken as given) with a QoS 1
/// will on `topic`.
fn with_will(protocol: ProtocolVersion, id: &str, user: Option<&str>, topic: &str) -> Connect {
    let mut connect = crate::will::with_will(protocol, id, topic);
    connect.username = user.map(s);
    connect
}

/// A client connected as `user`, subscribed to `filter`.
fn watcher(broker: &TestBroker, id: &str, user: &str, filter: &str) -> RawClient {
    let mut connect = connect_packet(V5, id, true);
    connect.username = Some(s(user));
    let mut client = RawClient::connected(broker.addr(), connect);
    client.subscribe(filter, QoS::AtLeastOnce);
    client
}

/// Connects with `connect`, expects the CONNACK `expected`, then drops the socket without
/// DISCONNECT (were the connection accepted, its will would fire).
fn connect_and_drop(broker: &TestBroker, connect: Connect, expected: ReasonCode) {
    let (client, connack) = RawClient::connect(broker.addr(), connect);
    assert_eq!(connack.reason_code, expected);
    client.drop_abruptly();
}

#[test]
fn a_will_the_acl_refuses_refuses_the_connect_and_never_reaches_subscribers() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir.path().join("acl"), ACL);
    let mut bob = watcher(&broker, "bob-watch", "bob", "bob/cmd");
    // Her PUBLISH there is refused...
    let mut connect = connect_packet(V5, "alice-pub", true);
    connect.username = Some(s("alice"));
    let mut alice = RawClient::connected(broker.addr(), connect);
    assert_eq!(
        alice.publish_simple("bob/cmd", b"rm -rf", QoS::AtLeastOnce),
        ReasonCode::NotAuthorized
    );
    alice.disconnect();
    // ...and so is her will: CONNACK 0x87 on 5.0, return code 5 on 3.1.1.
    for (protocol, id) in [(V5, "alice-5"), (V311, "alice-3")] {
        let connect = with_will(protocol, id, Some("alice"), "bob/cmd");
        connect_and_drop(&broker, connect, ReasonCode::NotAuthorized);
    }
    broker.wait_for_metrics("the refused wills", |m| m.wills_not_authorized == 2);
    bob.ping();
    bob.expect_silence(QUIET);
    assert_eq!(broker.metrics().publishes_not_authorized, 1);
}

#[test]
fn a_permitted_will_still_fires() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir.path().join("acl"), ACL);
    let mut bob = watcher(&broker, "bob-watch", "bob", "alice/status");
    for (protocol, id) in [(V5, "alice-5"), (V311, "alice-3")] {
        let connect = with_will(protocol, id, Some("alice"), "alice/status");
        connect_and_drop(&broker, connect, ReasonCode::Success);
        let will = bob.expect_publish_acked();
        assert_eq!(
            (will.topic(), will.payload()),
            ("alice/status", &b"gone"[..])
        );
    }
    assert_eq!(broker.metrics().wills_not_authorized, 0);
}

/// `$SYS` is written only by the broker, ACL or not: a retained will there refuses the
/// CONNECT and neither replaces the broker's value nor creates a topic.
#[test]
fn a_retained_will_on_sys_never_becomes_a_retained_sys_message() {
    let broker = TestBroker::with_config("[sys]\ninterval = 1\n");
    let mut early = RawClient::connected_clean(broker.addr(), V5, "early");
    early.subscribe("$SYS/broker/version", QoS::AtMostOnce);
    early.expect_publish_on("$SYS/broker/version");
    let attempts = [
        (V5, "forger-5", "$SYS/broker/version"),
        (V311, "forger-3", "$SYS/broker/version"),
        (V5, "alerter-5", "$SYS/fake/alert"),
        (V311, "alerter-3", "$SYS/fake/alert"),
    ];
    for (protocol, id, topic) in attempts {
        let mut connect = with_will(protocol, id, None, topic);
        let will = connect.will.as_mut().unwrap();
        will.retain = true;
        will.payload = Bytes::from_static(b"pwned 6.6.6");
        connect_and_drop(&broker, connect, ReasonCode::NotAuthorized);
    }
    broker.wait_for_metrics("the refused wills", |m| m.wills_not_authorized == 4);
    let mut late = RawClient::connected_clean(broker.addr(), V5, "late");
    late.subscribe("$SYS/fake/#", QoS::AtMostOnce);
    late.ping();
    late.expect_silence(QUIET);
    late.subscribe("$SYS/broker/version", QoS::AtMostOnce);
    let version = late.expect_publish_on("$SYS/broker/version");
    assert!(
        version.payload().starts_with(b"ringmq "),
        "{:?}",
        String::from_utf8_lossy(version.payload())
    );
}

#[test]
fn a_will_the_reloaded_acl_refuses_is_dropped_when_it_fires() {
    for protocol in [V5, V311] {
        let dir = tempfile::tempdir().unwrap();
        let acl = dir.path().join("acl");
        let broker = broker_with(&acl, ACL);
        let mut bob = watcher(&broker, "bob-watch", "bob", "alice/status");
        let connect = with_will(protocol, "alice-1", Some("alice"), "alice/status");
        let alice = RawClient::connected(broker.addr(), connect);
        // alice keeps only `alice/private/#`.
        let narrower = ACL.replace("topic readwrite alice/#", "topic readwrite alice/private/#");
        std::fs::write(&acl, narrower).unwrap();
        assert_eq!(broker.reload(), Vec::<String>::new());
        alice.drop_abruptly();
        broker.wait_for_metrics("the dropped will", |m| m.wills_not_authorized == 1);
        bob.ping();
        bob.expect_silence(QUIET);
    }
}

/// A delayed will is judged when its delay runs out, by the rules in force then.
#[test]
fn a_delayed_will_is_judged_when_its_delay_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("acl");
    std::fs::write(&acl, ACL).unwrap();
    let broker = TestBroker::with_manual_clock(&format!(
        "[auth]\nacl_file = {:?}\n",
        acl.display().to_string()
    ));
    let mut bob = watcher(&broker, "bob-watch", "bob", "alice/status");
    let mut connect = with_will(V5, "alice-1", Some("alice"), "alice/status");
    connect.clean_start = false;
    connect.properties.session_expiry_interval = Some(60);
    let will = connect.will.as_mut().unwrap();
    will.properties.will_delay_interval = Some(1);
    RawClient::connected(broker.addr(), connect).drop_abruptly();
    broker.wait_for_metrics("the close", |m| m.clients_connected == 1);
    std::fs::write(&acl, ACL.replace("topic readwrite alice/#", "")).unwrap();
    assert_eq!(broker.reload(), Vec::<String>::new());
    broker.advance(Duration::from_secs(2));
    broker.wait_for_metrics("the dropped will", |m| m.wills_not_authorized == 1);
    bob.ping();
    bob.expect_silence(QUIET);
}

/// Refuses publishes under `readonly/`.
struct ReadOnly;

impl ringmq::auth::Authenticator for ReadOnly {
    fn authenticate(&self, _connect: &Connect) -> Result<(), ReasonCode> {
        Ok(())
    }

    fn authorize_subscribe(&self, _client_id: &str, _filter: &str) -> bool {
        true
    }

    fn authorize_publish(&self, _client_id: &str, topic: &str) -> bool {
        !topic.starts_with("readonly/")
    }
}

#[test]
fn the_authorization_hook_judges_wills() {
    let broker = TestBroker::with_auth("", Box::new(ReadOnly));
    let mut watch = RawClient::connected_clean(broker.addr(), V5, "watch");
    watch.subscribe("#", QoS::AtLeastOnce);
    for protocol in [V5, V311] {
        let refused = with_will(protocol, "ro", None, "readonly/x");
        connect_and_drop(&broker, refused, ReasonCode::NotAuthorized);
        let allowed = with_will(protocol, "rw", None, "writable/x");
        connect_and_drop(&broker, allowed, ReasonCode::Success);
        assert_eq!(watch.expect_publish_acked().topic(), "writable/x");
    }
    watch.ping();
    watch.expect_silence(QUIET);
    assert_eq!(broker.metrics().wills_not_authorized, 2);
}

/// With a backend that answers topic checks, the CONNECT waits for its answer about the will;
/// that answer still counts when the will fires after a reload emptied the cache.
#[test]
fn an_http_backend_judges_wills_at_connect() {
    let server = HttpAuthServer::start(|path, body| {
        let status = match path {
            "/login" if body["password"] == "good" => 200,
            "/acl" if body["topic"].as_str().is_some_and(|t| t.starts_with("ok/")) => 200,
            _ => 403,
        };
        Answer {
            status,
            delay: Duration::from_millis(50),
        }
    });
    let broker = TestBroker::with_config(&format!(
        "[runtime]\nshards = 1\n[auth]\nbackends = [\"http\"]\n[auth.http]\nlogin_url = {:?}\nacl_url = {:?}\ntimeout_ms = 10000\n",
        server.url("/login"),
        server.url("/acl"),
    ));
    let login = |protocol, id: &str, topic: Option<&str>| {
        let mut connect = match topic {
            Some(topic) => with_will(protocol, id, Some("alice"), topic),
            None => connect_packet(protocol, id, true),
        };
        connect.username = Some(s("alice"));
        connect.password = Some(Bytes::from_static(b"good"));
        connect
    };
    let mut watch = RawClient::connected(broker.addr(), login(V5, "watch", None));
    watch.subscribe("ok/#", QoS::AtLeastOnce);
    for protocol in [V5, V311] {
        connect_and_drop(
            &broker,
            login(protocol, "bad", Some("bad/will")),
            ReasonCode::NotAuthorized,
        );
        connect_and_drop(
            &broker,
            login(protocol, "good", Some("ok/will")),
            ReasonCode::Success,
        );
        assert_eq!(watch.expect_publish_acked().topic(), "ok/will");
    }
    let alice = RawClient::connected(broker.addr(), login(V5, "later", Some("ok/later")));
    assert_eq!(broker.reload(), Vec::<String>::new());
    alice.drop_abruptly();
    assert_eq!(watch.expect_publish_acked().topic(), "ok/later");
    watch.ping();
    watch.expect_silence(QUIET);
    assert_eq!(broker.metrics().wills_not_authorized, 2);
}
