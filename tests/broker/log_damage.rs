//! A damaged log is never read silently (issue 52): a byte flipped in the middle of what the
//! log engine wrote stops the broker at start with an error naming the file and the offset, and
//! the refusal leaves the log files as they were (redb may still repair its own checkpoint file
//! after the kill, as it does at every open after a crash).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use codec::{ProtocolVersion, QoS, ReasonCode};

use crate::client::{RawClient, persistent_connect};
use crate::process::BrokerProcess;

const V5: ProtocolVersion = ProtocolVersion::V5;

/// The log file holding the most written (non-zero) bytes, and the middle of them.
pub(crate) fn written_log(store: &Path) -> (PathBuf, usize) {
    ["log-0", "log-1"]
        .iter()
        .map(|name| {
            let path = store.join(name);
            let bytes = std::fs::read(&path).unwrap();
            let written = bytes
                .iter()
                .rposition(|&b| b != 0)
                .map_or(0, |last| last + 1);
            (path, written)
        })
        .max_by_key(|(_, written)| *written)
        .map(|(path, written)| (path, written / 2))
        .unwrap()
}

/// Whether the log files of `store` hold exactly `expected` (compared without printing them).
pub(crate) fn logs_are(store: &Path, expected: &[Vec<u8>]) -> bool {
    ["log-0", "log-1"]
        .iter()
        .zip(expected)
        .all(|(name, bytes)| std::fs::read(store.join(name)).unwrap() == *bytes)
}

/// Runs the broker with `config` until it exits (at most 30 s); its exit success and stderr.
pub(crate) fn run_until_exit(config: &Path) -> (bool, String) {
    let port = crate::ports::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("--config")
        .arg(config)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the broker started on a damaged log instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A broker storing with the log engine in `dir`/store, and an offline persistent session
/// subscribed to `damage/#` at QoS 1; the broker, the store's directory, the config file.
pub(crate) fn broker_with_held_session(dir: &Path) -> (BrokerProcess, PathBuf, PathBuf) {
    let store = dir.join("store");
    let config = dir.join("ringmq.toml");
    let text = format!(
        "[persistence]\nengine = \"log\"\ndir = \"{}\"\n",
        store.display()
    );
    let broker = BrokerProcess::start(&text, &config);
    let mut subscriber = RawClient::connected(broker.addr, persistent_connect(V5, "held", 3600));
    subscriber.subscribe("damage/#", QoS::AtLeastOnce);
    subscriber.disconnect();
    (broker, store, config)
}

#[test]
fn a_flipped_byte_in_the_log_stops_the_start_with_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store, config) = broker_with_held_session(dir.path());
    let mut publisher = RawClient::connected_clean(broker.addr, V5, "damage-pub");
    for i in 0u32..200 {
        let reason = publisher.publish_simple("damage/t", &i.to_be_bytes(), QoS::AtLeastOnce);
        assert_eq!(reason, ReasonCode::Success);
    }
    broker.kill_9();
    let (log, at) = written_log(&store);
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(&log, bytes).unwrap();
    let before: Vec<Vec<u8>> = ["log-0", "log-1"]
        .iter()
        .map(|name| std::fs::read(store.join(name)).unwrap())
        .collect();
    let (started, stderr) = run_until_exit(&config);
    assert!(
        !started,
        "the broker exited with success on a damaged log:\n{stderr}"
    );
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    assert!(stderr.contains(&name), "{stderr}");
    assert!(stderr.contains("is damaged at byte"), "{stderr}");
    assert!(logs_are(&store, &before), "the refusal changed a log file");
}

#[test]
fn a_truncated_checkpoint_stops_the_start_with_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, store, config) = broker_with_held_session(dir.path());
    drop(broker);
    let checkpoint = store.join("checkpoint.redb");
    let len = std::fs::metadata(&checkpoint).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&checkpoint)
        .unwrap();
    file.set_len(len / 2).unwrap();
    let (started, stderr) = run_until_exit(&config);
    assert!(
        !started,
        "the broker started on a truncated checkpoint:\n{stderr}"
    );
    assert!(stderr.contains("checkpoint.redb is damaged"), "{stderr}");
}
