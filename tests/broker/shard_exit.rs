//! A shard that dies stops the whole broker process: non-zero exit with the cause in its log.
//! Uses the debug-only fault hook `RINGMQ_FAULT_PANIC_SHARD` (crates/broker-bin/src/
//! fault_injection.rs) on the real `ringmq` binary.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ringmq::fault_injection::{FAULT_PANIC_MESSAGE, FAULT_PANIC_SHARD_ENV};

/// Bound that turns a hang into a failure; never a measured time.
const HANG: Duration = Duration::from_secs(30);
/// Connections opened at once: all of them missing shard 0 has probability 2^-64.
const CLIENTS: usize = 64;

/// The port in the "ringmq listening" log line (`addrs=[127.0.0.1:PORT]`).
fn listening_port(line: &str) -> Option<u16> {
    let rest = line.split("127.0.0.1:").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[test]
fn a_panicking_shard_stops_the_broker_with_the_cause_logged() {
    let config =
        std::env::temp_dir().join(format!("ringmq-shard-exit-{}.toml", std::process::id()));
    std::fs::write(&config, crate::harness::BASE).expect("write the test config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("--config")
        .arg(&config)
        .env(FAULT_PANIC_SHARD_ENV, "0")
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ringmq");
    let stderr = child.stderr.take().expect("piped stderr");
    let (line_tx, lines) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = line_tx.send(line);
        }
    });
    let mut log = Vec::new();
    let port = loop {
        let line = lines.recv_timeout(HANG).expect("broker logs its address");
        let port = line
            .contains("ringmq listening")
            .then(|| listening_port(&line))
            .flatten();
        log.push(line);
        if let Some(port) = port {
            break port;
        }
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let clients: Vec<_> = (0..CLIENTS)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    let (status_tx, status) = mpsc::channel();
    std::thread::spawn(move || status_tx.send(child.wait()));
    let status = status
        .recv_timeout(HANG)
        .expect("broker exits")
        .expect("wait");
    drop(clients);
    reader.join().expect("stderr reader");
    log.extend(lines.try_iter());
    let _ = std::fs::remove_file(&config);
    let log = log.join("\n");
    assert!(!status.success(), "exit status {status}; log:\n{log}");
    assert!(log.contains("shard 0 panicked"), "cause named; log:\n{log}");
    assert!(
        log.contains(FAULT_PANIC_MESSAGE),
        "message logged; log:\n{log}"
    );
}
