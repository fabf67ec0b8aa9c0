//! A timing run, not a test (`#[ignore]`d): the QoS 1 path of one session whose queue holds
//! `backlog` messages, committed as batches of 64 `MessageQueued` + `InflightSent` +
//! `InflightAcked` triples (the new message queued at the tail, the head sent and acknowledged),
//! for each durable engine and sync mode; then a load of many sessions with full queues.
//!
//! ```text
//! cargo test -p session-store --release --lib storage::timing_tests -- --ignored --nocapture --test-threads 1
//! ```
//!
//! `RINGMQ_TIMING_TRIPLES` (default 100000) and `RINGMQ_TIMING_DIR` (default the system
//! temporary directory) change the run.

use std::time::Instant;

use bytes::Bytes;
use codec::QoS;

use super::contract_tests::{pid, saved, text};
use super::engine_tests::Open;
use super::*;
use crate::SessionExpiry;

const BATCH: u64 = 64;

fn message() -> StoredMessage {
    StoredMessage {
        topic: Bytes::from_static(b"sensors/site-1/temperature"),
        payload: Bytes::from(vec![0x5a; 100]),
        qos: QoS::AtLeastOnce,
        retain: false,
        properties: Bytes::new(),
        expires_at: None,
        sub_ids: Vec::new(),
    }
}

fn queued(client: &str, seq: u64) -> SessionWrite {
    SessionWrite::MessageQueued {
        client_id: text(client),
        seq,
        message: message(),
    }
}

fn dir() -> tempfile::TempDir {
    let base = std::env::var_os("RINGMQ_TIMING_DIR").map_or_else(std::env::temp_dir, Into::into);
    tempfile::Builder::new()
        .prefix("ringmq-timing-")
        .tempdir_in(base)
        .unwrap()
}

fn triples() -> u64 {
    std::env::var("RINGMQ_TIMING_TRIPLES").map_or(100_000, |n| n.parse().unwrap())
}

/// Commits `triples` triples for one session with `backlog` queued; prints the rate.
fn qos1_path<S: SessionStorage>(name: &str, open: Open<S>, sync: SyncMode, backlog: u64) {
    let dir = dir();
    let mut storage = open(&dir.path().join("db"), sync).unwrap();
    let mut setup = vec![saved("a", SessionExpiry::Never)];
    setup.extend((1..=backlog).map(|seq| queued("a", seq)));
    for chunk in setup.chunks(1_000) {
        storage.commit(chunk).unwrap();
    }
    storage.sync().unwrap();
    storage.load_paged(0).unwrap();
    let triples = triples();
    let (mut head, mut tail) = (1, backlog);
    let started = Instant::now();
    let mut done = 0;
    while done < triples {
        let n = BATCH.min(triples - done);
        let mut batch = Vec::with_capacity(3 * usize::try_from(n).unwrap());
        for i in 0..n {
            let id = pid(u16::try_from(1 + (done + i) % 60_000).unwrap());
            tail += 1;
            batch.push(queued("a", tail));
            batch.push(SessionWrite::InflightSent {
                client_id: text("a"),
                seq: head,
                packet_id: id,
            });
            batch.push(SessionWrite::InflightAcked {
                client_id: text("a"),
                packet_id: id,
            });
            head += 1;
        }
        let committed = storage.commit(&batch).unwrap();
        assert!(committed.skipped.is_empty(), "{:?}", committed.skipped);
        done += n;
    }
    storage.sync().unwrap();
    let elapsed = started.elapsed();
    let commits = triples.div_ceil(BATCH);
    println!(
        "{name:5} {sync:11?} backlog {backlog:6}: {triples} triples in {commits} commits: {:.2} s, {:.0} triples/s, {:.1} us/commit",
        elapsed.as_secs_f64(),
        triples as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / commits as f64,
    );
    let loaded = storage.load().unwrap();
    assert_eq!(
        loaded.sessions[0].queued.len(),
        usize::try_from(backlog).unwrap()
    );
}

/// Stores `sessions` sessions with `queued` messages each, then times `load` and `load_paged`.
fn load_many<S: SessionStorage>(name: &str, open: Open<S>, sessions: u64, queued_each: u64) {
    let dir = dir();
    let path = dir.path().join("db");
    let mut storage = open(&path, SyncMode::Deferred).unwrap();
    let started = Instant::now();
    for s in 0..sessions {
        let client = format!("client-{s:06}");
        let mut batch = vec![saved(&client, SessionExpiry::Never)];
        batch.extend((1..=queued_each).map(|seq| queued(&client, seq)));
        storage.commit(&batch).unwrap();
    }
    storage.sync().unwrap();
    let filled = started.elapsed();
    drop(storage);
    let mut storage = engine_tests::reopen(open, &path, SyncMode::Deferred);
    let started = Instant::now();
    let paged = storage.load_paged(0).unwrap();
    let paged_time = started.elapsed();
    assert_eq!(
        paged.queued_totals.len(),
        usize::try_from(sessions).unwrap()
    );
    let started = Instant::now();
    let full = storage.load().unwrap();
    let full_time = started.elapsed();
    assert_eq!(full.sessions.len(), usize::try_from(sessions).unwrap());
    println!(
        "{name:5} {sessions} sessions x {queued_each} queued: fill (Deferred, one commit per session) {:.2} s, load_paged(0) {:.2} s, load {:.2} s",
        filled.as_secs_f64(),
        paged_time.as_secs_f64(),
        full_time.as_secs_f64(),
    );
}

#[test]
#[ignore = "a timing run: see the module docs"]
fn qos1_path_timing() {
    for sync in [SyncMode::Deferred, SyncMode::EveryCommit] {
        for backlog in [100, 10_000] {
            qos1_path("sled", SledStorage::open, sync, backlog);
            qos1_path("redb", RedbStorage::open, sync, backlog);
        }
    }
}

#[test]
#[ignore = "a timing run: see the module docs"]
fn load_timing() {
    load_many("sled", SledStorage::open, 10_000, 100);
    load_many("redb", RedbStorage::open, 10_000, 100);
}
