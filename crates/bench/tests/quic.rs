//! `ringmq-bench --quic` against a real broker: an in-process broker (the `ringmq` library, a
//! dev-dependency of this package) with a `[[listeners.quic]]` listener on a self-signed
//! certificate made here, and this package's `ringmq-bench` binary (cargo builds it for the
//! package's integration tests and names its path in `CARGO_BIN_EXE_ringmq-bench`) running a
//! short QoS 1 p2p scenario over QUIC. Its JSON summary must show every client connected and
//! every message delivered once.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use ringmq::Broker;
use ringmq::config::{default_raw, parse_raw};

/// Publisher/subscriber pairs of the run.
const PAIRS: u64 = 4;
/// Messages each publisher sends.
const PER_PUBLISHER: u64 = 40;

/// A self-signed certificate for `localhost` and its key, as PEM files in `dir`.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert_path, key_path)
}

/// A two-shard broker, in memory, with a TCP and a QUIC listener on loopback; the QUIC
/// listener's address.
fn broker(cert: &Path, key: &Path) -> (Broker, SocketAddr) {
    let overrides = format!(
        "[listeners]\ntcp = [\"127.0.0.1:0\"]\n[runtime]\nshards = 2\n[sys]\ninterval = 0\n\
         [persistence]\nengine = \"none\"\n\
         [[listeners.quic]]\nbind = \"127.0.0.1:0\"\ncert = \"{}\"\nkey = \"{}\"\n",
        cert.display(),
        key.display()
    );
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("test overrides", &overrides).unwrap());
    let broker = Broker::start(raw.validate().unwrap()).expect("broker starts");
    let quic = broker.local_addrs_of("quic")[0];
    (broker, quic)
}

#[test]
fn a_p2p_scenario_over_quic_delivers_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(dir.path());
    let (broker, quic) = broker(&cert, &key);
    let json = dir.path().join("summary.json");
    let output = Command::new(env!("CARGO_BIN_EXE_ringmq-bench"))
        .args(["p2p", "--quic", "--host", &quic.to_string()])
        .arg("--tls-ca")
        .arg(&cert)
        .args(["--tls-server-name", "localhost"])
        .args(["--pairs", &PAIRS.to_string(), "--qos", "1"])
        .args(["--rate", "40", "--limit", &PER_PUBLISHER.to_string()])
        .args([
            "--warmup",
            "1",
            "--duration",
            "20",
            "--threads",
            "2",
            "--quiet",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    broker.shutdown();
    broker.join().expect("broker stops cleanly");
    assert!(
        output.status.success(),
        "ringmq-bench failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let total = |name: &str| summary["totals"][name].as_u64().unwrap();
    let messages = PAIRS * PER_PUBLISHER;
    assert_eq!(total("connected"), 2 * PAIRS, "{summary}");
    assert_eq!(total("connect_failures"), 0, "{summary}");
    assert_eq!(total("sent"), messages, "{summary}");
    assert_eq!(
        total("acked"),
        messages,
        "every PUBACK came back: {summary}"
    );
    assert_eq!(total("received"), messages, "{summary}");
    assert_eq!(total("duplicates"), 0, "{summary}");
    assert_eq!(summary["expected"].as_u64(), Some(messages), "{summary}");
    assert_eq!(summary["lost"].as_u64(), Some(0), "{summary}");
}
