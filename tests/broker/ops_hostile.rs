//! The operations HTTP listener against hostile clients (issue 47): a slowloris flood, a
//! request head that trickles past its deadline, bare-LF line ends, foreign `Host` values (DNS
//! rebinding) and cross-origin state changes from a web page.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use codec::QoS;

use crate::client::{RawClient, V5};
use crate::harness::TestBroker;
use crate::ops::{Answer, HTTP, connect, exchange, get, read_answer};

/// Slow clients holding `count` connections: each has sent the start of a request head and
/// sends one more byte of it every half second; one closed under it is opened again (a real
/// slowloris keeps its pressure up).
struct Slowloris {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Slowloris {
    fn start(addr: SocketAddr, count: usize) -> Self {
        let open = move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
                .unwrap();
            stream
        };
        // Every one is open (and accepted in order, before any later connection) on return.
        let mut streams: Vec<TcpStream> = (0..count).map(|_| open()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(500));
                for stream in &mut streams {
                    if stream.write_all(b"a").is_err() {
                        *stream = open();
                    }
                }
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Slowloris {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[test]
fn health_checks_are_answered_while_slow_clients_hold_every_connection() {
    // Defaults: max_connections = 16, header_timeout_ms = 10000, read_timeout_ms = 10000.
    let broker = TestBroker::with_config(HTTP);
    let addr = broker.http_addr();
    let flood = Slowloris::start(addr, 16);
    for _ in 0..3 {
        let health = get(addr, "/healthz", "");
        assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(get(addr, "/readyz", "").status, 200);
    drop(flood);
    broker.assert_serving();
}

#[test]
fn a_head_trickling_past_its_deadline_gets_408() {
    let broker = TestBroker::with_config(&format!("{HTTP}header_timeout_ms = 500\n"));
    let addr = broker.http_addr();
    let stream = connect(addr);
    let mut trickle = stream.try_clone().unwrap();
    // A byte every 100 ms: far within read_timeout_ms, never a complete head.
    let trickler = std::thread::spawn(move || {
        let _ = trickle.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ");
        for _ in 0..50 {
            if trickle.write_all(b"a").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    // `connect` reads with a 10 s timeout, far above the 500 ms deadline.
    let answer = read_answer(&mut BufReader::new(stream));
    assert_eq!(answer.status, 408, "{}", answer.body);
    assert_eq!(answer.header("connection"), Some("close"));
    trickler.join().unwrap();

    // A connection that sends nothing is closed at the deadline too, without an answer.
    let mut idle = connect(addr);
    assert_eq!(idle.read(&mut [0; 16]).unwrap(), 0);
    assert_eq!(get(addr, "/healthz", "").status, 200);
}

#[test]
fn bare_lf_line_ends_are_answered_at_once() {
    let broker = TestBroker::with_config(HTTP);
    let addr = broker.http_addr();
    let mut stream = TcpStream::connect(addr).unwrap();
    // Well above the 10 s head deadline and read timeout: a hang shows as no answer at all.
    stream
        .set_read_timeout(Some(Duration::from_secs(25)))
        .unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\nHost: localhost\nConnection: close\n\n")
        .unwrap();
    let answer = read_answer(&mut BufReader::new(stream));
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok\n"));
}

/// `method path` with `headers` (each ending in CRLF) and `body`, on a new connection.
fn send(addr: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> Answer {
    let request = format!(
        "{method} {path} HTTP/1.1\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    exchange(addr, request.as_bytes())
}

#[test]
fn foreign_hosts_are_refused_even_with_credentials() {
    let broker = TestBroker::with_config(&format!("{HTTP}allowed_hosts = [\"ops.example\"]\n"));
    let addr = broker.http_addr();
    let _client = RawClient::connected_clean(broker.addr(), V5, "rebound");
    for path in ["/api/v1/config", "/api/v1/clients", "/metrics", "/healthz"] {
        let refused = send(addr, "GET", path, "Host: attacker.example\r\n", "");
        assert_eq!(refused.status, 421, "{path}: {}", refused.body);
        assert!(!refused.body.contains("rebound"));
    }
    let port = addr.port();
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".to_owned(),
        format!("ops.example:{port}"),
    ] {
        let served = send(
            addr,
            "GET",
            "/api/v1/clients",
            &format!("Host: {host}\r\n"),
            "",
        );
        assert_eq!(served.status, 200, "{host}: {}", served.body);
        assert!(served.body.contains("\"rebound\""), "{}", served.body);
    }

    let broker = TestBroker::with_config(&format!("{HTTP}token = \"s3cret\"\n"));
    let addr = broker.http_addr();
    let token = "Authorization: Bearer s3cret\r\n";
    let refused = send(
        addr,
        "GET",
        "/metrics",
        &format!("Host: attacker.example\r\n{token}"),
        "",
    );
    assert_eq!(refused.status, 421, "{}", refused.body);
    let served = send(
        addr,
        "GET",
        "/metrics",
        &format!("Host: 127.0.0.1\r\n{token}"),
        "",
    );
    assert_eq!(served.status, 200);
}

#[test]
fn cross_origin_publishes_and_reloads_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ringmq.toml");
    std::fs::write(&file, HTTP).unwrap();
    let broker = TestBroker::with_config(HTTP);
    broker.set_config_source(file.clone());
    let addr = broker.http_addr();
    let host = format!("Host: 127.0.0.1:{}\r\n", addr.port());
    let own = format!("{host}Origin: http://127.0.0.1:{}\r\n", addr.port());
    let mut subscriber = RawClient::connected_clean(broker.addr(), V5, "web-sub");
    subscriber.subscribe("web/t", QoS::AtMostOnce);

    // What a page on evil.example can send without a preflight.
    let evil = r#"{"topic": "web/t", "payload": "evil"}"#;
    let plain = "Content-Type: text/plain\r\n";
    for headers in [
        format!("{host}Origin: http://evil.example\r\n{plain}"),
        format!("{host}Origin: null\r\n{plain}"),
        format!("{host}Sec-Fetch-Site: cross-site\r\n{plain}"),
    ] {
        let refused = send(addr, "POST", "/api/v1/publish", &headers, evil);
        assert_eq!(refused.status, 403, "{headers}: {}", refused.body);
    }
    // Same origin, but not JSON: what a form on the page itself could post.
    let form = send(
        addr,
        "POST",
        "/api/v1/publish",
        &format!("{own}{plain}"),
        evil,
    );
    assert_eq!(form.status, 415, "{}", form.body);
    let good = r#"{"topic": "web/t", "payload": "good"}"#;
    let json = "Content-Type: application/json\r\n";
    let published = send(
        addr,
        "POST",
        "/api/v1/publish",
        &format!("{own}{json}"),
        good,
    );
    assert_eq!(published.status, 200, "{}", published.body);
    // In order: a refused publish would have come first.
    assert_eq!(subscriber.expect_publish().payload(), b"good");

    std::fs::write(&file, format!("{HTTP}[ip]\nmax_connections = 50\n")).unwrap();
    for headers in [
        format!("{host}Origin: http://evil.example\r\n"),
        format!("{host}Sec-Fetch-Site: cross-site\r\n"),
    ] {
        let refused = send(addr, "POST", "/api/v1/reload", &headers, "");
        assert_eq!(refused.status, 403, "{headers}: {}", refused.body);
    }
    let config = send(addr, "GET", "/api/v1/config", &host, "");
    assert!(
        !config.body.contains("max_connections = 50"),
        "not reloaded: {}",
        config.body
    );
    // curl and the like send no Origin: a reload from them still works.
    let reloaded = send(addr, "POST", "/api/v1/reload", &host, "");
    assert_eq!(reloaded.status, 200, "{}", reloaded.body);
    let config = send(addr, "GET", "/api/v1/config", &host, "");
    assert!(
        config.body.contains("max_connections = 50"),
        "{}",
        config.body
    );
}
