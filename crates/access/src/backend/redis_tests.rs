//! The Redis backend against a real `redis-server` on a loopback port, with `$7$` and `$6$`
//! hashes made by the real `mosquitto_passwd` and go-auth PBKDF2 hashes made here.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::num::NonZeroU32;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::pbkdf2;

use super::{RedisBackend, RedisSettings};
use crate::backend::{
    AclAnswer, AclRequest, Backend, BackendError, Grant, LoginAnswer, LoginRequest, RuleAccess,
    SaltEncoding, SetupError, TopicAccess, TopicRule,
};
use crate::test_ports::free_port;

const REDIS_SERVER: &str = "redis-server";
const MOSQUITTO_PASSWD: &str = "/usr/bin/mosquitto_passwd";

/// A `redis-server` on a free loopback port, killed on drop.
struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts one with extra arguments (e.g. `--requirepass`).
    fn start_with(extra: &[&str]) -> Self {
        Self::start_on(free_port(), extra)
    }

    fn start_on(port: u16, extra: &[&str]) -> Self {
        let child = Command::new(REDIS_SERVER)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot run {REDIS_SERVER} ({error}): scripts/test.sh installs it")
            });
        let server = Self { child, port };
        server.wait_until_listening();
        server
    }

    fn wait_until_listening(&self) {
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not listen on port {}",
                self.port
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A plain connection to seed data with.
    fn seed(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection())
            .expect("connect to the test redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn settings(url: String) -> RedisSettings {
    RedisSettings {
        url,
        timeout: Duration::from_secs(5),
        salt_encoding: SaltEncoding::Base64,
    }
}

fn backend(server: &RedisServer) -> RedisBackend {
    RedisBackend::new(settings(server.url())).expect("valid settings")
}

fn set(connection: &mut redis::Connection, key: &str, value: &str) {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .exec(connection)
        .expect("SET");
}

fn add(connection: &mut redis::Connection, key: &str, members: &[&str]) {
    redis::cmd("SADD")
        .arg(key)
        .arg(members)
        .exec(connection)
        .expect("SADD");
}

/// Adds `username` with password `pw` (a go-auth PBKDF2-SHA256 hash).
fn add_user(connection: &mut redis::Connection, username: &str) {
    let hash = go_auth_hash(true, "pw", b"salt", SaltEncoding::Base64);
    set(connection, username, &hash);
}

fn login_request(username: Option<&str>, password: &[u8]) -> LoginRequest {
    LoginRequest {
        client_id: "sensor-1".to_owned(),
        username: username.map(str::to_owned),
        password: Some(password.to_vec()),
        peer: "127.0.0.1:40000".parse().expect("an address"),
    }
}

fn login(backend: &RedisBackend, username: &str, password: &str) -> LoginAnswer {
    backend
        .login(&login_request(Some(username), password.as_bytes()))
        .expect("an answer")
}

/// The `$7$` (no hash type) or `$6$` (`sha512`) hash the real `mosquitto_passwd` writes.
fn mosquitto_hash(hash_type: Option<&str>, password: &str) -> String {
    assert!(
        Path::new(MOSQUITTO_PASSWD).exists(),
        "{MOSQUITTO_PASSWD} is missing: scripts/test.sh installs it (Debian package mosquitto)"
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("passwd");
    let mut command = Command::new(MOSQUITTO_PASSWD);
    if let Some(hash_type) = hash_type {
        command.args(["-H", hash_type]);
    }
    let status = command
        .args(["-c", "-b"])
        .arg(&file)
        .args(["user", password])
        .status()
        .expect("mosquitto_passwd runs");
    assert!(status.success(), "mosquitto_passwd: {status}");
    let text = std::fs::read_to_string(&file).expect("the password file");
    let (_, hash) = text.trim().split_once(':').expect("user:hash");
    hash.to_owned()
}

/// A mosquitto-go-auth PBKDF2 hash: `PBKDF2$ALGORITHM$ITERATIONS$SALT$HASH`.
fn go_auth_hash(sha256: bool, password: &str, salt: &[u8], salt_encoding: SaltEncoding) -> String {
    let (name, algorithm, key_len) = if sha256 {
        ("sha256", pbkdf2::PBKDF2_HMAC_SHA256, 32)
    } else {
        ("sha512", pbkdf2::PBKDF2_HMAC_SHA512, 64)
    };
    let iterations = NonZeroU32::new(901).expect("non-zero");
    let mut derived = vec![0; key_len];
    pbkdf2::derive(
        algorithm,
        iterations,
        salt,
        password.as_bytes(),
        &mut derived,
    );
    let salt = match salt_encoding {
        SaltEncoding::Base64 => BASE64.encode(salt),
        SaltEncoding::Utf8 => String::from_utf8(salt.to_vec()).expect("a UTF-8 salt"),
    };
    format!(
        "PBKDF2${name}${iterations}${salt}${}",
        BASE64.encode(derived)
    )
}

fn assert_password_checked(backend: &RedisBackend, username: &str, password: &str) {
    assert!(
        matches!(login(backend, username, password), LoginAnswer::Allow(_)),
        "{username}: the right password"
    );
    for wrong in ["wrong", "", &format!("{password}x")] {
        assert_eq!(
            login(backend, username, wrong),
            LoginAnswer::Deny,
            "{username}: {wrong:?}"
        );
    }
}

#[test]
fn each_hash_format_verifies() {
    let server = RedisServer::start();
    let mut seed = server.seed();
    let password = "s3cr3t: with spaces & $igns";
    let users = [
        ("mosquitto-7", mosquitto_hash(None, password)),
        ("mosquitto-6", mosquitto_hash(Some("sha512"), password)),
        (
            "go-sha256",
            go_auth_hash(true, password, b"0123456789abcdef", SaltEncoding::Base64),
        ),
        (
            "go-sha512",
            go_auth_hash(false, password, b"\x00\xff salt", SaltEncoding::Base64),
        ),
    ];
    for (user, hash) in &users {
        set(&mut seed, user, hash);
    }
    let backend = backend(&server);
    for (user, _) in &users {
        assert_password_checked(&backend, user, password);
    }
}

#[test]
fn go_auth_hashes_with_utf8_salts_verify_when_configured() {
    let server = RedisServer::start();
    let hash = go_auth_hash(true, "pw", b"SaltSalt", SaltEncoding::Utf8);
    set(&mut server.seed(), "alice", &hash);
    let utf8 = RedisBackend::new(RedisSettings {
        salt_encoding: SaltEncoding::Utf8,
        ..settings(server.url())
    })
    .expect("valid settings");
    assert_password_checked(&utf8, "alice", "pw");
    // Read as base64 (`SaltSalt` is valid base64 too), the salt is other bytes: refused.
    assert_eq!(login(&backend(&server), "alice", "pw"), LoginAnswer::Deny);
}

#[test]
fn a_known_user_gets_its_rules_and_others_no_opinion() {
    let server = RedisServer::start();
    add_user(&mut server.seed(), "alice");
    let backend = backend(&server);
    assert_eq!(
        login(&backend, "alice", "pw"),
        LoginAnswer::Allow(Grant {
            expires_at: None,
            rules: Some(Vec::new()),
            superuser: false,
        })
    );
    assert_eq!(login(&backend, "bob", "pw"), LoginAnswer::Unknown);
    let anonymous = backend.login(&login_request(None, b"pw"));
    assert_eq!(anonymous.ok(), Some(LoginAnswer::Unknown));
}

#[test]
fn a_hash_in_no_known_format_is_a_bad_answer() {
    let server = RedisServer::start();
    let mut seed = server.seed();
    set(&mut seed, "plain", "plain-text-password");
    set(&mut seed, "broken", "PBKDF2$md5$10$c2FsdA==$aGFzaA==");
    let backend = backend(&server);
    for user in ["plain", "broken"] {
        let answer = backend.login(&login_request(Some(user), b"plain-text-password"));
        match answer {
            Err(BackendError::BadAnswer { backend, detail }) => {
                assert_eq!(backend, "redis");
                assert!(detail.contains(user), "{detail}");
            }
            other => panic!("{user}: expected BadAnswer, got {other:?}"),
        }
    }
}

#[test]
fn a_superuser_is_marked_and_allowed_every_topic() {
    let server = RedisServer::start();
    let mut seed = server.seed();
    add_user(&mut seed, "root");
    set(&mut seed, "root:su", "true");
    add_user(&mut seed, "alice");
    set(&mut seed, "alice:su", "yes");
    let backend = backend(&server);
    let grant = |user| match login(&backend, user, "pw") {
        LoginAnswer::Allow(grant) => grant,
        other => panic!("{user}: expected Allow, got {other:?}"),
    };
    assert!(grant("root").superuser);
    assert!(!grant("alice").superuser);
    let check = |user: &str| {
        backend
            .check_acl(&acl_request(user, "any/topic", TopicAccess::Publish))
            .expect("an answer")
    };
    assert_eq!(check("root"), AclAnswer::Allow);
    assert_eq!(check("alice"), AclAnswer::Deny);
}

fn topic_rule(filter: &str, access: RuleAccess) -> TopicRule {
    TopicRule {
        filter: filter.to_owned(),
        access,
    }
}

/// Alice with one filter in each of her sets and of the common sets.
fn seed_acls(server: &RedisServer) {
    let mut seed = server.seed();
    add_user(&mut seed, "alice");
    add(&mut seed, "alice:sacls", &["alerts/#"]);
    add(&mut seed, "alice:racls", &["plant/+/temperature"]);
    add(&mut seed, "alice:wacls", &["plant/1/cmd"]);
    add(&mut seed, "alice:rwacls", &["alice/#"]);
    add(&mut seed, "common:sacls", &["public/#"]);
    add(&mut seed, "common:racls", &["devices/%c/config"]);
    add(&mut seed, "common:wacls", &["devices/%c/state"]);
    add(&mut seed, "common:rwacls", &["users/%u/inbox"]);
    add(&mut seed, "bob:wacls", &["bob/#"]);
}

#[test]
fn login_hands_over_every_acl_set_with_substitutions() {
    let server = RedisServer::start();
    seed_acls(&server);
    let LoginAnswer::Allow(grant) = login(&backend(&server), "alice", "pw") else {
        panic!("alice refused");
    };
    let rules = grant.rules.expect("Redis hands the rules over");
    assert_eq!(
        rules,
        vec![
            topic_rule("alerts/#", RuleAccess::Read),
            topic_rule("plant/+/temperature", RuleAccess::Read),
            topic_rule("plant/1/cmd", RuleAccess::Write),
            topic_rule("alice/#", RuleAccess::ReadWrite),
            topic_rule("public/#", RuleAccess::Read),
            topic_rule("devices/sensor-1/config", RuleAccess::Read),
            topic_rule("devices/sensor-1/state", RuleAccess::Write),
            topic_rule("users/alice/inbox", RuleAccess::ReadWrite),
        ]
    );
}

#[test]
fn members_that_are_not_valid_filters_are_skipped() {
    let server = RedisServer::start();
    let mut seed = server.seed();
    add_user(&mut seed, "alice");
    add(
        &mut seed,
        "alice:racls",
        &["a/#/b", "ok/+", "bad+level", ""],
    );
    add(&mut seed, "common:wacls", &["ids/%c"]);
    let backend = backend(&server);
    let LoginAnswer::Allow(grant) = login(&backend, "alice", "pw") else {
        panic!("alice refused");
    };
    assert_eq!(
        grant.rules,
        Some(vec![
            topic_rule("ok/+", RuleAccess::Read),
            topic_rule("ids/sensor-1", RuleAccess::Write),
        ])
    );
    // A client id with a wildcard must not widen `ids/%c`.
    let mut wildcard_client = login_request(Some("alice"), b"pw");
    wildcard_client.client_id = "#".to_owned();
    let Ok(LoginAnswer::Allow(grant)) = backend.login(&wildcard_client) else {
        panic!("alice refused");
    };
    assert_eq!(
        grant.rules,
        Some(vec![topic_rule("ok/+", RuleAccess::Read)])
    );
}

fn acl_request(username: &str, topic: &str, access: TopicAccess) -> AclRequest {
    AclRequest {
        client_id: "sensor-1".to_owned(),
        username: Some(username.to_owned()),
        peer: "127.0.0.1:40000".parse().expect("an address"),
        topic: topic.to_owned(),
        access,
    }
}

#[test]
fn topic_checks_judge_the_same_sets() {
    let server = RedisServer::start();
    seed_acls(&server);
    let backend = backend(&server);
    use TopicAccess::{Publish, Receive, Subscribe};
    let cases = [
        ("alerts/fire", Receive, true),
        ("alerts/#", Subscribe, true),
        ("alerts/fire", Publish, false),
        ("plant/7/temperature", Receive, true),
        ("plant/+/temperature", Subscribe, true),
        ("plant/#", Subscribe, false),
        ("plant/1/cmd", Publish, true),
        ("plant/2/cmd", Publish, false),
        ("plant/1/cmd", Receive, false),
        ("alice/x/y", Publish, true),
        ("alice/x/y", Receive, true),
        ("public/news", Receive, true),
        ("public/news", Publish, false),
        ("devices/sensor-1/config", Receive, true),
        ("devices/sensor-2/config", Receive, false),
        ("devices/sensor-1/state", Publish, true),
        ("users/alice/inbox", Publish, true),
        ("users/bob/inbox", Publish, false),
        ("bob/x", Publish, false),
    ];
    for (topic, access, allowed) in cases {
        let answer = backend
            .check_acl(&acl_request("alice", topic, access))
            .expect("an answer");
        let expected = if allowed {
            AclAnswer::Allow
        } else {
            AclAnswer::Deny
        };
        assert_eq!(answer, expected, "{access:?} {topic}");
    }
    let unknown = backend.check_acl(&acl_request("nobody", "public/news", Receive));
    assert_eq!(unknown.ok(), Some(AclAnswer::Unknown));
}

#[test]
fn a_password_and_database_in_the_url_are_used() {
    let server = RedisServer::start_with(&["--requirepass", "redis-pw"]);
    let mut seed = redis::Client::open(format!("redis://:redis-pw@127.0.0.1:{}/3", server.port))
        .and_then(|client| client.get_connection())
        .expect("connect with the password");
    add_user(&mut seed, "alice");
    let url = |auth: &str, db: u8| format!("redis://{auth}127.0.0.1:{}/{db}", server.port);
    let in_db_3 = RedisBackend::new(settings(url(":redis-pw@", 3))).expect("valid settings");
    assert!(matches!(
        login(&in_db_3, "alice", "pw"),
        LoginAnswer::Allow(_)
    ));
    let in_db_0 = RedisBackend::new(settings(url(":redis-pw@", 0))).expect("valid settings");
    assert_eq!(login(&in_db_0, "alice", "pw"), LoginAnswer::Unknown);
    let without = RedisBackend::new(settings(url("", 3))).expect("valid settings");
    let refused = without.login(&login_request(Some("alice"), b"pw"));
    assert!(
        matches!(refused, Err(BackendError::Unavailable { .. })),
        "{refused:?}"
    );
}

#[test]
fn a_restarted_server_is_reconnected_to_and_one_down_is_unavailable() {
    let server = RedisServer::start();
    add_user(&mut server.seed(), "alice");
    let backend = backend(&server);
    assert!(matches!(
        login(&backend, "alice", "pw"),
        LoginAnswer::Allow(_)
    ));
    let port = server.port;
    drop(server);
    // Back on the same port (empty): the pooled connection is dead, a new one is made.
    let server = RedisServer::start_on(port, &[]);
    assert_eq!(login(&backend, "alice", "pw"), LoginAnswer::Unknown);
    drop(server);
    match backend.login(&login_request(Some("alice"), b"pw")) {
        Err(BackendError::Unavailable { backend, detail }) => {
            assert_eq!(backend, "redis");
            assert!(detail.contains(&format!("127.0.0.1:{port}")), "{detail}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    let acl = backend.check_acl(&acl_request("alice", "a", TopicAccess::Publish));
    assert!(
        matches!(acl, Err(BackendError::Unavailable { .. })),
        "{acl:?}"
    );
}

#[test]
fn a_server_that_never_answers_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("address");
    // Accepts one connection and never answers on it.
    thread::spawn(move || {
        let accepted = listener.accept();
        thread::sleep(Duration::from_secs(5));
        drop(accepted);
    });
    let backend = RedisBackend::new(RedisSettings {
        timeout: Duration::from_millis(300),
        ..settings(format!("redis://{addr}"))
    })
    .expect("valid settings");
    let started = Instant::now();
    let answer = backend.login(&login_request(Some("alice"), b"pw"));
    let took = started.elapsed();
    assert!(
        matches!(
            answer,
            Err(BackendError::Timeout {
                backend: "redis",
                timeout_ms: 300
            })
        ),
        "{answer:?}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

#[test]
fn an_invalid_url_is_refused_without_its_password() {
    for url in [
        "http://127.0.0.1:6379",
        "redis://:hunter2@[bad-host/0",
        "redis://user:pa@ss-hunter2@[bad-host/0",
        "redis://hunter2@[bad-host/0",
        "not a url",
    ] {
        match RedisBackend::new(settings(url.to_owned())) {
            Err(SetupError::InvalidUrl {
                backend,
                url: shown,
                ..
            }) => {
                assert_eq!(backend, "redis");
                assert!(!shown.contains("hunter2"), "{shown}");
            }
            other => panic!("{url}: expected InvalidUrl, got {other:?}"),
        }
    }
}
