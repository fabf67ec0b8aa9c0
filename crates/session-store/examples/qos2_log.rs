//! The `log` engine alone under a persistent QoS 2 p2p load, in one thread: the key writes a
//! broker's shards would hand the store thread, committed in groups as large as the broker
//! makes them, without sockets, shards or another core. Prints the time per message.
//!
//!   cargo run --release -p session-store --example qos2_log -- [PAIRS] [MESSAGES] [PER_COMMIT] [sync]
//!
//! PAIRS publisher/subscriber sessions (1,000), MESSAGES in all (1,000,000), PER_COMMIT
//! messages per pair and group commit (9: each group commit holds that many messages of each
//! pair at each of a QoS 2 flow's three steps), `sync`: an `fdatasync` per commit.

use std::time::{Duration, Instant};

use bytes::Bytes;
use codec::{MqttStr, PacketId, ProtocolVersion, QoS};
use session_store::SessionExpiry;
use session_store::SyncMode;
use session_store::storage::{
    LogSize, LoggedStorage, SessionStorage, SessionWrite, StoredMessage, StoredOwner,
};

/// The broker's allocator: the costs measured are the broker's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn arg(index: usize, default: u64) -> u64 {
    std::env::args()
        .nth(index)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// This thread's time on a CPU so far (Linux: `/proc/thread-self/schedstat`), if readable.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

fn text(s: &str) -> MqttStr {
    MqttStr::from_bytes(Bytes::copy_from_slice(s.as_bytes())).expect("ASCII")
}

fn message(topic: &Bytes, n: u64) -> Box<StoredMessage> {
    let mut payload = vec![0u8; 256];
    payload[..8].copy_from_slice(&n.to_be_bytes());
    Box::new(StoredMessage {
        topic: topic.clone(),
        payload: Bytes::from(payload),
        qos: QoS::ExactlyOnce,
        retain: false,
        properties: Bytes::new(),
        expires_at: None,
        sub_ids: Vec::new(),
        accepted_at: None,
        key: 0,
    })
}

/// A QoS 2 packet id for message `n` of a pair (1..=65,535, as a window of 64 cycles them).
fn packet_id(n: u64) -> PacketId {
    PacketId::new((n % 65_535 + 1) as u16).expect("non-zero")
}

fn main() {
    let (pairs, total, per_commit) = (arg(1, 1_000), arg(2, 1_000_000), arg(3, 9));
    let sync = std::env::args().nth(4).as_deref() == Some("sync");
    let dir = tempfile::tempdir().expect("temporary directory");
    let mode = if sync {
        SyncMode::EveryCommit
    } else {
        SyncMode::Deferred
    };
    let mut storage = LoggedStorage::open_with(dir.path(), mode, 64 << 20, LogSize::default())
        .expect("open the log engine");
    let publishers: Vec<MqttStr> = (0..pairs).map(|p| text(&format!("pub-{p:05}"))).collect();
    let subscribers: Vec<MqttStr> = (0..pairs).map(|p| text(&format!("sub-{p:05}"))).collect();
    let topics: Vec<Bytes> = (0..pairs)
        .map(|p| Bytes::from(format!("bench/p2p/{p}")))
        .collect();
    let saved: Vec<SessionWrite> = (publishers.iter().chain(&subscribers))
        .map(|client_id| SessionWrite::SessionSaved {
            client_id: client_id.clone(),
            protocol: ProtocolVersion::V3_1_1,
            expiry: SessionExpiry::Never,
            will: None,
            owner: Box::new(StoredOwner::Anonymous),
        })
        .collect();
    storage.commit(&saved).expect("sessions");

    let rounds = total / (pairs * per_commit) + 2;
    let mut batch = Vec::new();
    let (mut messages, mut elapsed) = (0u64, Duration::ZERO);
    let cpu_before = cpu_time();
    for round in 0..rounds {
        batch.clear();
        for pair in 0..pairs as usize {
            let (publisher, subscriber) = (&publishers[pair], &subscribers[pair]);
            for step in 0..per_commit {
                // This round's new messages, the last round's releases, the round before's completions.
                let new = round * per_commit + step;
                if round * pairs * per_commit < total {
                    let id = packet_id(new);
                    batch.push(SessionWrite::Qos2Received {
                        client_id: publisher.clone(),
                        packet_id: id,
                    });
                    batch.push(SessionWrite::MessageSent {
                        client_id: subscriber.clone(),
                        seq: new + 1,
                        packet_id: id,
                        message: message(&topics[pair], new),
                    });
                }
                if round >= 1 && (round - 1) * pairs * per_commit < total {
                    let id = packet_id(new - per_commit);
                    batch.push(SessionWrite::Qos2Released {
                        client_id: publisher.clone(),
                        packet_id: id,
                    });
                    batch.push(SessionWrite::InflightReleased {
                        client_id: subscriber.clone(),
                        packet_id: id,
                    });
                }
                if round >= 2 && (round - 2) * pairs * per_commit < total {
                    batch.push(SessionWrite::InflightAcked {
                        client_id: subscriber.clone(),
                        packet_id: packet_id(new - 2 * per_commit),
                    });
                }
            }
        }
        if round * pairs * per_commit < total {
            messages += pairs * per_commit;
        }
        let started = Instant::now();
        let committed = storage.commit(&batch).expect("commit");
        elapsed += started.elapsed();
        assert!(
            committed.skipped.is_empty(),
            "skipped writes: {:?}",
            committed.skipped
        );
    }
    let cpu = cpu_before
        .zip(cpu_time())
        .map(|(before, after)| after - before);
    let per_message = |time: Duration| time.as_nanos() as f64 / messages as f64;
    println!(
        "{messages} messages, {rounds} commits of {} writes: {:.0} ns per message in commits, \
         {} ns of CPU per message in all",
        pairs * per_commit * 5,
        per_message(elapsed),
        cpu.map_or("?".to_string(), |cpu| format!("{:.0}", per_message(cpu))),
    );
}
