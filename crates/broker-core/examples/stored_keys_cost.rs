//! What reading the stored keys costs a node of a cluster at start (`store/stored_keys.rs`):
//! a redb store with SESSIONS offline sessions of COPIES queued QoS 2 copies each is loaded as
//! the broker loads it (MEMORY copies per session in memory, the rest left on disk), then the
//! keys of every copy are read. Prints the read's time and the resident memory it added.
//!
//!   cargo run --release -p broker-core --example stored_keys_cost -- [SESSIONS] [COPIES] [MEMORY]
//!
//! Defaults: 100 sessions of 10,000 copies (1,000,000 in all), 1,000 in memory per session
//! (`persistence.memory_queue_messages`' default).

use std::time::Instant;

use bytes::Bytes;
use codec::{MqttStr, ProtocolVersion, QoS};
use session_store::SessionExpiry;
use session_store::storage::{
    RedbStorage, SessionStorage, SessionWrite, StoredMessage, StoredOwner, SyncMode,
};

/// The broker's allocator: the memory measured is the broker's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Copies written per commit while the store is made.
const PER_COMMIT: u64 = 20_000;

fn arg(index: usize, default: u64) -> u64 {
    std::env::args()
        .nth(index)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// This process's resident memory in bytes (`VmRSS` of `/proc/self/status`).
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number of kB");
    kib * 1024
}

fn client(n: u64) -> MqttStr {
    MqttStr::try_from(format!("keys-{n}")).expect("ASCII")
}

fn copy(key: u64) -> Box<StoredMessage> {
    Box::new(StoredMessage {
        topic: Bytes::from_static(b"plant/line-4/meter"),
        payload: Bytes::from_static(&[7; 64]),
        qos: QoS::ExactlyOnce,
        retain: false,
        properties: Bytes::new(),
        expires_at: None,
        sub_ids: Vec::new(),
        accepted_at: None,
        key,
    })
}

/// Writes `sessions` sessions of `copies` queued copies each to `storage`.
fn fill(storage: &mut RedbStorage, sessions: u64, copies: u64) {
    let mut writes = Vec::new();
    for s in 0..sessions {
        writes.push(SessionWrite::SessionSaved {
            client_id: client(s),
            protocol: ProtocolVersion::V5,
            expiry: SessionExpiry::Never,
            will: None,
            owner: Box::new(StoredOwner::Unbound),
        });
        for seq in 1..=copies {
            writes.push(SessionWrite::MessageQueued {
                client_id: client(s),
                seq,
                message: copy(0x9e37_79b9_7f4a_7c15_u64.wrapping_mul(s * copies + seq)),
            });
            if writes.len() as u64 >= PER_COMMIT {
                storage.commit(&writes).expect("commit");
                writes.clear();
            }
        }
    }
    storage.commit(&writes).expect("commit");
}

fn main() {
    let (sessions, copies, memory) = (arg(1, 100), arg(2, 10_000), arg(3, 1_000));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut storage = RedbStorage::open(dir.path(), SyncMode::Deferred).expect("redb");
    fill(&mut storage, sessions, copies);
    drop(storage);

    let mut storage = RedbStorage::open(dir.path(), SyncMode::Deferred).expect("redb");
    let paged = storage
        .load_paged(usize::try_from(memory).expect("fits"))
        .expect("load");
    let loaded: Vec<_> = (paged.recovered.sessions.into_iter())
        .zip(paged.queued_totals)
        .collect();
    let before = resident();
    let started = Instant::now();
    let keys = broker_core::store::stored_keys(&mut storage, &loaded).expect("read");
    let took = started.elapsed();
    let added = resident().saturating_sub(before);
    let count: usize = keys.values().map(|k| k.len()).sum();
    println!(
        "{sessions} sessions x {copies} copies ({memory} in memory each): {count} keys read in {:.0} ms \
         ({:.2} us a copy); resident memory +{:.1} MiB ({:.1} bytes a copy)",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / count.max(1) as f64,
        added as f64 / (1 << 20) as f64,
        added as f64 / count.max(1) as f64,
    );
}
