//! `ringmq store check` and `ringmq store salvage` on stores the real broker wrote and then
//! had damaged (issue 52): a flipped byte in the middle of the log, in its first record, a
//! truncated checkpoint, a deleted one. The refusal names the commands; `check` names the
//! damage without changing the store; `salvage` writes everything intact into a new
//! directory, and a broker started on it hands the held session every message of the records
//! before and after the damage.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use codec::{ProtocolVersion, QoS, ReasonCode};

use crate::client::{Event, RawClient, persistent_connect};
use crate::log_damage::{broker_with_held_session, logs_are, run_until_exit, written_log};
use crate::process::BrokerProcess;

const V5: ProtocolVersion = ProtocolVersion::V5;

/// Runs `ringmq store ARGS`; its exit code and stdout (stderr appended).
fn store_tool(args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("store")
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), text)
}

/// A held session with `count` QoS 1 messages of `size` bytes (each acknowledged, so each
/// in its own log record) queued in the log store of `dir`/store, the broker then killed; the
/// store's directory and the config.
fn store_with_queued(
    dir: &Path,
    count: u32,
    size: usize,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (broker, store, config) = broker_with_held_session(dir);
    let mut publisher = RawClient::connected_clean(broker.addr, V5, "damage-pub");
    for i in 0..count {
        let mut payload = i.to_be_bytes().to_vec();
        payload.resize(size.max(4), b'.');
        let reason = publisher.publish_simple("damage/t", &payload, QoS::AtLeastOnce);
        assert_eq!(reason, ReasonCode::Success);
    }
    broker.kill_9();
    (store, config)
}

/// Starts a broker on the store in `store`, resumes the held session and takes every queued
/// message (acknowledging each); their numbers.
fn delivered_from(store: &Path, dir: &Path) -> Vec<u32> {
    let text = format!(
        "[persistence]\nengine = \"log\"\ndir = \"{}\"\n",
        store.display()
    );
    let broker = BrokerProcess::start(&text, &dir.join("salvaged.toml"));
    let mut held = RawClient::connected(broker.addr, persistent_connect(V5, "held", 3600));
    let mut numbers = Vec::new();
    while let Event::Packet(packet) = held.next_event(Duration::from_secs(2)) {
        if let codec::Packet::Publish(publish) = *packet {
            held.acknowledge(&publish);
            numbers.push(u32::from_be_bytes(
                publish.payload()[..4].try_into().unwrap(),
            ));
        }
    }
    numbers
}

/// The number after `label` in `report` ("intact: 3 session(s), 197 queued message(s)").
fn queued_in(report: &str, label: &str) -> usize {
    let line = report.lines().find(|l| l.starts_with(label)).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| w.starts_with("queued")).unwrap();
    words[at - 1].parse().unwrap()
}

/// Starts the broker on `config`'s damaged store: it must refuse, saying `says`.
fn refused(config: &Path, says: &str) {
    let (started, stderr) = run_until_exit(config);
    assert!(!started && stderr.contains(says), "{stderr}");
}

/// `ringmq store check` of `store`: it must find damage (exit 2); its report.
fn checked_damaged(store: &Path) -> String {
    let (code, report) = store_tool(&["check", "--dir", store.to_str().unwrap()]);
    assert_eq!(code, 2, "check found no damage:\n{report}");
    report
}

/// `ringmq store salvage` of `store` into `into`: it must succeed; its report.
fn salvaged(store: &Path, into: &Path) -> String {
    let args = [
        "salvage",
        "--dir",
        store.to_str().unwrap(),
        "--into",
        into.to_str().unwrap(),
    ];
    let (code, report) = store_tool(&args);
    assert_eq!(code, 0, "{report}");
    report
}

/// [`delivered_from`], each message checked to come once.
fn delivered_once(store: &Path, dir: &Path) -> Vec<u32> {
    let numbers = delivered_from(store, dir);
    let distinct: BTreeSet<u32> = numbers.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        numbers.len(),
        "a message came twice: {numbers:?}"
    );
    numbers
}

#[test]
fn salvage_recovers_every_record_around_a_flipped_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (store, config) = store_with_queued(dir.path(), 200, 4);
    let (log, at) = written_log(&store);
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[at] ^= 0x01;
    std::fs::write(&log, bytes).unwrap();
    let logs: Vec<Vec<u8>> = ["log-0", "log-1"]
        .iter()
        .map(|name| std::fs::read(store.join(name)).unwrap())
        .collect();

    refused(&config, "ringmq store salvage");
    let report = checked_damaged(&store);
    assert!(
        report.contains("damage at byte") && report.contains("opens: no"),
        "{report}"
    );
    let intact = queued_in(&report, "intact:");

    let into = dir.path().join("salvaged");
    let report = salvaged(&store, &into);
    assert!(report.contains("opens: yes"), "{report}");
    assert!(
        logs_are(&store, &logs),
        "check or salvage changed the damaged store"
    );

    let numbers = delivered_once(&into, dir.path());
    let distinct: BTreeSet<u32> = numbers.iter().copied().collect();
    assert_eq!(numbers.len(), intact, "delivered other than check's count");
    assert!(
        numbers.len() >= 195,
        "only {} of 200 came back",
        numbers.len()
    );
    assert!(
        distinct.contains(&0) && distinct.contains(&199),
        "{numbers:?}"
    );
}

#[test]
fn a_damaged_first_record_is_refused_and_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let (store, config) = store_with_queued(dir.path(), 50, 4);
    let (log, _) = written_log(&store);
    let mut bytes = std::fs::read(&log).unwrap();
    // Past the 16-byte file header and into the first record's body.
    bytes[16 + 20] ^= 0x40;
    std::fs::write(&log, bytes).unwrap();
    refused(&config, "is damaged at byte 16");
    let into = dir.path().join("salvaged");
    let report = salvaged(&store, &into);
    // What the first record held is lost (a session record written again later survives);
    // every message salvage counts comes back, once.
    let numbers = delivered_once(&into, dir.path());
    assert_eq!(numbers.len(), queued_in(&report, "intact:"), "{report}");
}

#[test]
fn a_truncated_checkpoint_is_reported_and_the_logs_salvaged() {
    let dir = tempfile::tempdir().unwrap();
    let (store, config) = store_with_queued(dir.path(), 30, 4);
    let checkpoint = store.join("checkpoint.redb");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&checkpoint)
        .unwrap();
    file.set_len(std::fs::metadata(&checkpoint).unwrap().len() / 2)
        .unwrap();
    refused(&config, "ringmq store check");
    let report = checked_damaged(&store);
    assert!(report.contains("the checkpoint cannot be read"), "{report}");
    let into = dir.path().join("salvaged");
    salvaged(&store, &into);
    // Every write since the store was created is still in the first epoch's log.
    let numbers = delivered_once(&into, dir.path());
    assert_eq!(numbers, (0..30).collect::<Vec<_>>());
}

#[test]
fn a_deleted_checkpoint_is_refused_and_nothing_created() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let config = dir.path().join("ringmq.toml");
    let text = format!(
        "[persistence]\nengine = \"log\"\ndir = \"{}\"\nlog_mb = 1\nlog_max_mb = 1\n",
        store.display()
    );
    let broker = BrokerProcess::start(&text, &config);
    let mut held = RawClient::connected(broker.addr, persistent_connect(V5, "held", 3600));
    held.subscribe("damage/#", QoS::AtLeastOnce);
    held.disconnect();
    let mut publisher = RawClient::connected_clean(broker.addr, V5, "damage-pub");
    // 3 MB through 1 MiB logs: several epochs, so the checkpoint holds the first ones.
    for i in 0u32..750 {
        let mut payload = i.to_be_bytes().to_vec();
        payload.resize(4096, b'.');
        let reason = publisher.publish_simple("damage/t", &payload, QoS::AtLeastOnce);
        assert_eq!(reason, ReasonCode::Success);
    }
    broker.kill_9();
    std::fs::remove_file(store.join("checkpoint.redb")).unwrap();
    let (started, stderr) = run_until_exit(&config);
    assert!(
        !started,
        "the broker started without its checkpoint:\n{stderr}"
    );
    assert!(stderr.contains("checkpoint.redb is missing"), "{stderr}");
    assert!(
        !store.join("checkpoint.redb").exists(),
        "the refusal created a checkpoint"
    );
    let report = checked_damaged(&store);
    assert!(report.contains("checkpoint.redb is missing"), "{report}");
    // The checkpoint, created afresh, is behind the logs: refused all the same.
    std::fs::write(store.join("checkpoint.redb"), b"").unwrap();
    refused(&config, "is behind its logs");
}
