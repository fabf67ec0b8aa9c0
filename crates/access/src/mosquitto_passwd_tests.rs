//! Password files made by the real `mosquitto_passwd` (Debian's `mosquitto` package), checked
//! with [`PasswordFile::verify`]. Skipped, with a `SKIP:` line, where the tool is not installed.

use std::path::Path;
use std::process::Command;

use super::PasswordFile;

const MOSQUITTO_PASSWD: &str = "/usr/bin/mosquitto_passwd";

/// Creates `file` with one user through `mosquitto_passwd [-H hash_type] -c -b`.
fn create_with_tool(file: &Path, hash_type: Option<&str>, user: &str, password: &str) {
    let mut command = Command::new(MOSQUITTO_PASSWD);
    if let Some(hash_type) = hash_type {
        command.args(["-H", hash_type]);
    }
    let status = command
        .arg("-c")
        .arg("-b")
        .arg(file)
        .args([user, password])
        .status()
        .expect("mosquitto_passwd runs");
    assert!(status.success(), "mosquitto_passwd failed: {status}");
}

/// Adds a user to an existing `file` through `mosquitto_passwd [-H hash_type] -b`.
fn add_with_tool(file: &Path, hash_type: &str, user: &str, password: &str) {
    let status = Command::new(MOSQUITTO_PASSWD)
        .args(["-H", hash_type, "-b"])
        .arg(file)
        .args([user, password])
        .status()
        .expect("mosquitto_passwd runs");
    assert!(status.success(), "mosquitto_passwd failed: {status}");
}

fn tool_missing() -> bool {
    if Path::new(MOSQUITTO_PASSWD).exists() {
        return false;
    }
    println!("SKIP: {MOSQUITTO_PASSWD} is not installed (Debian package `mosquitto`)");
    true
}

fn assert_verifies(file: &PasswordFile, user: &str, password: &str) {
    assert!(file.verify(user, password.as_bytes()), "{user} refused");
    assert!(
        !file.verify(user, b"wrong password"),
        "{user}: wrong password"
    );
    assert!(!file.verify(user, format!("{password}x").as_bytes()));
    assert!(!file.verify(&format!("{user}2"), password.as_bytes()));
}

#[test]
fn each_hash_type_of_the_tool_verifies() {
    if tool_missing() {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    for hash_type in [None, Some("sha512-pbkdf2"), Some("sha512")] {
        let path = dir.path().join("passwd");
        create_with_tool(&path, hash_type, "sensor-1", "s3cr3t: with spaces & $igns");
        let file = PasswordFile::load(&path).expect("the tool's file parses");
        assert_eq!(file.len(), 1);
        assert_verifies(&file, "sensor-1", "s3cr3t: with spaces & $igns");
    }
}

#[test]
fn a_file_mixing_hash_types_verifies_every_user() {
    if tool_missing() {
        return;
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("passwd");
    create_with_tool(&path, None, "alice", "alice-password");
    add_with_tool(&path, "sha512", "bob", "bob-password");
    add_with_tool(&path, "sha512-pbkdf2", "carol", "ünïcödé");
    let file = PasswordFile::load(&path).expect("the tool's file parses");
    assert_eq!(file.len(), 3);
    assert_verifies(&file, "alice", "alice-password");
    assert_verifies(&file, "bob", "bob-password");
    assert_verifies(&file, "carol", "ünïcödé");
    assert!(!file.verify("alice", b"bob-password"));
}
