//! `[auth]`: a password file made by the real `mosquitto_passwd`, anonymous access, the rule
//! that a listener reachable from other hosts needs authentication, and reload.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::Path;
use std::process::Command;

use codec::{ProtocolVersion, ReasonCode};

use crate::client::{RawClient, V5, connect_packet, s};
use crate::harness::{BASE, TestBroker};

const V311: ProtocolVersion = ProtocolVersion::V3_1_1;

/// Writes `file` with one user through `mosquitto_passwd -c -b` (Debian's mosquitto package,
/// installed by the test command).
pub fn passwd_file(file: &Path, user: &str, password: &str) {
    let status = Command::new("mosquitto_passwd")
        .arg("-c")
        .arg("-b")
        .arg(file)
        .args([user, password])
        .status()
        .expect("mosquitto_passwd runs (install Debian's mosquitto package)");
    assert!(status.success());
}

/// The CONNACK reason for `user`/`password` (`None`: no username).
fn connack(
    broker: &TestBroker,
    protocol: ProtocolVersion,
    login: Option<(&str, &str)>,
) -> ReasonCode {
    let mut connect = connect_packet(protocol, "login", true);
    if let Some((user, password)) = login {
        connect.username = Some(s(user));
        connect.password = Some(bytes::Bytes::copy_from_slice(password.as_bytes()));
    }
    let (_client, ack) = RawClient::connect(broker.addr(), connect);
    ack.reason_code
}

fn auth_config(file: &Path, extra: &str) -> String {
    format!(
        "[auth]\npassword_file = {:?}\n{extra}",
        file.display().to_string()
    )
}

#[test]
fn the_password_file_decides_who_connects_on_both_protocol_versions() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("passwd");
    passwd_file(&file, "alice", "s3cret");
    let broker = TestBroker::with_config(&auth_config(&file, ""));
    for protocol in [V5, V311] {
        assert_eq!(
            connack(&broker, protocol, Some(("alice", "s3cret"))),
            ReasonCode::Success
        );
        assert_eq!(
            connack(&broker, protocol, Some(("alice", "wrong"))),
            ReasonCode::BadUserNameOrPassword
        );
        assert_eq!(
            connack(&broker, protocol, Some(("mallory", "s3cret"))),
            ReasonCode::BadUserNameOrPassword
        );
        assert_eq!(connack(&broker, protocol, None), ReasonCode::NotAuthorized);
    }
}

#[test]
fn allow_anonymous_admits_clients_without_a_username_only() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("passwd");
    passwd_file(&file, "alice", "s3cret");
    let broker = TestBroker::with_config(&auth_config(&file, "allow_anonymous = true\n"));
    assert_eq!(connack(&broker, V5, None), ReasonCode::Success);
    assert_eq!(
        connack(&broker, V5, Some(("alice", "wrong"))),
        ReasonCode::BadUserNameOrPassword
    );
}

fn validate(overrides: &str) -> Result<ringmq::config::Config, String> {
    let mut raw = ringmq::config::default_raw().unwrap();
    raw.overlay(ringmq::config::parse_raw("base", BASE).unwrap());
    raw.overlay(ringmq::config::parse_raw("test", overrides).unwrap());
    raw.validate().map_err(|e| e.to_string())
}

#[test]
fn a_listener_reachable_from_other_hosts_needs_authentication_or_allow_anonymous() {
    let open = "[listeners]\ntcp = [\"0.0.0.0:0\"]\n";
    let error = validate(open).expect_err("an open broker on every interface is refused");
    assert!(
        error.contains("auth.allow_anonymous") && error.contains("0.0.0.0"),
        "{error}"
    );
    let wss = "[[listeners.ws]]\nbind = \"0.0.0.0:0\"\n";
    assert!(validate(wss).is_err(), "any listener kind counts");
    let quic = "[[listeners.quic]]\nbind = \"0.0.0.0:0\"\ncert = \"c\"\nkey = \"k\"\n";
    assert!(validate(quic).is_err(), "a QUIC listener (UDP) counts too");
    assert!(validate(&format!("{open}[auth]\nallow_anonymous = true\n")).is_ok());
    assert!(validate(&format!("{open}[auth]\npassword_file = \"passwd\"\n")).is_ok());
    assert!(validate("[listeners]\ntcp = [\"127.0.0.1:0\", \"[::1]:0\"]\n").is_ok());
}

#[test]
fn reload_reads_the_password_file_again_and_a_broken_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("passwd");
    passwd_file(&file, "alice", "old");
    let broker = TestBroker::with_config(&auth_config(&file, ""));
    assert_eq!(
        connack(&broker, V5, Some(("alice", "old"))),
        ReasonCode::Success
    );
    passwd_file(&file, "alice", "new");
    assert_eq!(broker.reload(), Vec::<String>::new());
    assert_eq!(
        connack(&broker, V5, Some(("alice", "new"))),
        ReasonCode::Success
    );
    assert_eq!(
        connack(&broker, V5, Some(("alice", "old"))),
        ReasonCode::BadUserNameOrPassword
    );
    std::fs::write(&file, "alice:$9$nonsense\n").unwrap();
    let errors = broker.reload();
    assert!(
        errors.len() == 1 && errors[0].contains(&file.display().to_string()),
        "{errors:?}"
    );
    assert_eq!(
        connack(&broker, V5, Some(("alice", "new"))),
        ReasonCode::Success
    );

    let mut raw = ringmq::config::default_raw().unwrap();
    raw.overlay(ringmq::config::parse_raw("base", BASE).unwrap());
    raw.overlay(ringmq::config::parse_raw("test", &auth_config(&file, "")).unwrap());
    let error = match ringmq::Broker::start(raw.validate().unwrap()) {
        Ok(_) => panic!("a broken password file must stop the start"),
        Err(error) => error.to_string(),
    };
    assert!(
        error.contains(&file.display().to_string()) && error.contains("line 1"),
        "{error}"
    );
}
