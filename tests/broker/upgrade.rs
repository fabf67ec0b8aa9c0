//! Upgrades without downtime (docs/operations.md, "Upgrade without downtime"): a real `ringmq`
//! process with a store, a QoS 1 and a QoS 2 publisher and a persistent subscriber publishing
//! and receiving throughout, upgraded ten times in a row with SIGUSR2 (each time a new process
//! takes the listening sockets, the old one drains): no connection attempt is refused, and
//! every message acknowledged to a publisher reaches the subscriber.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use codec::QoS;

use crate::faults::checker;
use crate::faults::clients::{self, Published, Received, lock};
use crate::harness::wait_until_within;

const UPGRADES: usize = 10;
/// A hang guard for a new process taking over, not a timing assertion.
const TAKEOVER_GUARD: Duration = Duration::from_secs(30);

/// Sends `signal` to `pid`.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

/// The pid in a log line's `pid=N` field.
fn pid_in(line: &str) -> Option<u32> {
    let at = line.find(" pid=")?;
    line[at + 5..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn ten_upgrades_in_a_row_refuse_no_connection_and_lose_no_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ringmq.toml");
    let store = dir.path().join("store");
    std::fs::write(
        &config,
        format!(
            "[runtime]\nshards = 2\n[persistence]\nengine = \"redb\"\ndir = \"{}\"\n",
            store.display()
        ),
    )
    .unwrap();
    let addr: SocketAddr = ([127, 0, 0, 1], crate::ports::free_port()).into();
    let mut first = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("--config")
        .arg(&config)
        .arg("--listen")
        .arg(addr.to_string())
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Every process of the chain writes to this pipe: its reader must drain it to the end.
    let (successors, successor) = mpsc::channel();
    let stderr = first.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("listeners handed to the new process")
                && let Some(pid) = pid_in(&line)
            {
                let _ = successors.send(pid);
            }
        }
    });
    wait_until_within(TAKEOVER_GUARD, "the broker serving", || {
        std::net::TcpStream::connect(addr).ok().map(drop)
    });
    let stop = Arc::new(AtomicBool::new(false));
    let stop_reading = Arc::new(AtomicBool::new(false));
    let (reader, received) = clients::subscriber(1, vec![addr], 0, Arc::clone(&stop_reading));
    wait_until_within(TAKEOVER_GUARD, "the subscriber subscribed", || {
        lock(&received).subscribed.then_some(())
    });
    let publishers: Vec<_> = [(0u8, QoS::AtLeastOnce), (1, QoS::ExactlyOnce)]
        .into_iter()
        .map(|(index, qos)| clients::publisher(index, qos, vec![addr], 0, Arc::clone(&stop)))
        .collect();

    let mut pid = first.id();
    for _ in 0..UPGRADES {
        std::thread::sleep(Duration::from_millis(1000));
        signal(pid, "-USR2");
        pid = successor
            .recv_timeout(TAKEOVER_GUARD)
            .expect("a new process took over");
    }
    std::thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    let published: Vec<Published> = publishers.into_iter().map(|p| p.join().unwrap()).collect();
    let acked = checker::acknowledged(&published);
    wait_until_within(
        Duration::from_secs(60),
        "every acknowledged message delivered",
        || {
            let view = Received {
                counts: lock(&received).counts.clone(),
                ..Received::default()
            };
            checker::all_delivered(&acked, std::slice::from_ref(&view)).then_some(())
        },
    );
    stop_reading.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let received = std::mem::take(&mut *lock(&received));
    signal(pid, "-TERM");
    let _ = first.wait();
    let verdict = checker::deliveries(&published, std::slice::from_ref(&received));
    let refused_by: Vec<_> = published.iter().map(|p| &p.refused_by).collect();
    eprintln!("refused acknowledgements by reason: {refused_by:?}");
    let refused: u64 =
        published.iter().map(|p| p.refused_connects).sum::<u64>() + received.refused_connects;
    eprintln!(
        "upgrades: {UPGRADES}; acknowledged {}, refused acks {}, unanswered {}, lost {}, QoS 2 twice {}, sessions lost {}, refused connections {refused}",
        verdict.acked,
        verdict.refused,
        verdict.unknown,
        verdict.lost.len(),
        verdict.qos2_twice,
        verdict.sessions_lost
    );
    assert_eq!(
        refused, 0,
        "connection attempts refused during the upgrades"
    );
    assert!(verdict.acked > 0);
    assert!(
        verdict.lost.is_empty() && verdict.sessions_lost == 0,
        "{verdict:?}"
    );
}
