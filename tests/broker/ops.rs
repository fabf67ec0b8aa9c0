//! The operations HTTP listener (`[http]`) over real sockets: `/metrics` moving with MQTT
//! traffic and valid in the exposition format, `/healthz` and `/readyz`, credentials, bounds
//! and bad requests, HTTPS with a certificate made by the test; slow clients, foreign hosts and
//! cross-origin requests (the browser attacks of issue 47).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use base64::Engine;
use codec::QoS;
use ringmq::config::{default_raw, parse_raw};
use ringmq::ops::Scrape;

use crate::client::{RawClient, V5, persistent_connect};
use crate::harness::{BASE, TestBroker, wait_until};
use crate::pki::TestPki;

/// An operations listener on an ephemeral loopback port.
pub const HTTP: &str = "[http]\nbind = \"127.0.0.1:0\"\n";

/// A response: status, header lines (lower-cased names), body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response (a `Content-Length` body) from `reader`.
pub fn read_answer(reader: &mut impl BufRead) -> Answer {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("status line: {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Answer {
        status,
        headers,
        body: String::from_utf8(body).unwrap(),
    }
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Sends `raw` bytes on a new connection and reads one answer.
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> Answer {
    let mut stream = connect(addr);
    stream.write_all(raw).unwrap();
    read_answer(&mut BufReader::new(stream))
}

/// `GET path` with optional extra header lines, on a new connection.
pub fn get(addr: SocketAddr, path: &str, headers: &str) -> Answer {
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n");
    exchange(addr, request.as_bytes())
}

/// `GET /metrics`, checked against the exposition format.
pub fn scrape(broker: &TestBroker) -> Scrape {
    let answer = get(broker.http_addr(), "/metrics", "");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer
            .header("content-type")
            .unwrap()
            .contains("version=0.0.4")
    );
    Scrape::parse(&answer.body).unwrap_or_else(|e| panic!("{e}\n{}", answer.body))
}

/// Scrapes until `done` holds for a valid document.
pub fn scrape_until(broker: &TestBroker, what: &str, done: impl Fn(&Scrape) -> bool) -> Scrape {
    wait_until(what, || {
        let scrape = scrape(broker);
        done(&scrape).then_some(scrape)
    })
}

fn qos(scrape: &Scrape, name: &str, qos: &str) -> f64 {
    scrape.value(name, &[("qos", qos)]).unwrap_or_default()
}

#[test]
fn metrics_move_with_mqtt_traffic() {
    let broker = TestBroker::with_config(HTTP);
    let before = scrape(&broker);
    let info = before
        .samples
        .iter()
        .find(|s| s.name == "ringmq_info")
        .unwrap();
    let version = ("version".to_owned(), env!("CARGO_PKG_VERSION").to_owned());
    assert!(info.labels.contains(&version), "{info:?}");
    let mut subscriber = RawClient::connected_clean(broker.addr(), V5, "ops-sub");
    subscriber.subscribe("ops/t", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "ops-pub");
    for _ in 0..3 {
        publisher.publish_simple("ops/t", b"zero", QoS::AtMostOnce);
    }
    for _ in 0..2 {
        publisher.publish_simple("ops/t", b"one!", QoS::AtLeastOnce);
    }
    for _ in 0..5 {
        subscriber.expect_publish_acked();
    }
    let after = scrape_until(&broker, "the publishes in /metrics", |s| {
        s.sum("ringmq_delivery_latency_seconds_count") >= 5.0
    });
    assert_eq!(qos(&after, "ringmq_publish_received_total", "0"), 3.0);
    assert_eq!(qos(&after, "ringmq_publish_received_total", "1"), 2.0);
    assert_eq!(
        qos(&after, "ringmq_publish_received_payload_bytes_total", "1"),
        8.0
    );
    assert_eq!(qos(&after, "ringmq_publish_sent_total", "0"), 3.0);
    assert_eq!(qos(&after, "ringmq_publish_sent_total", "1"), 2.0);
    assert_eq!(
        after.value("ringmq_messages_received_total", &[]),
        Some(5.0)
    );
    assert_eq!(after.value("ringmq_messages_sent_total", &[]), Some(5.0));
    let tcp = after.value("ringmq_listener_connections_open", &[("listener", "tcp")]);
    assert_eq!(tcp, Some(2.0));
    assert!(after.value("ringmq_subscriptions", &[]).unwrap() >= 1.0);
    assert!(after.sum("ringmq_shard_turns_total") > before.sum("ringmq_shard_turns_total"));
    assert!(after.sum("ringmq_shard_busy_seconds_total") > 0.0);
    assert_eq!(after.sum("ringmq_shard_up"), 2.0);
}

#[test]
fn drops_are_counted_by_reason_and_add_up_to_the_total() {
    let broker = TestBroker::with_config(HTTP);
    let mut offline = RawClient::connected(broker.addr(), persistent_connect(V5, "ops-away", 600));
    offline.subscribe("ops/drop", QoS::AtMostOnce);
    offline.disconnect();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "ops-dropper");
    publisher.publish_simple("ops/drop", b"nobody home", QoS::AtMostOnce);
    publisher.ping();
    let scrape = scrape_until(&broker, "the offline drop", |s| {
        s.value("ringmq_message_drops_total", &[("reason", "offline")]) >= Some(1.0)
    });
    let total = scrape.value("ringmq_messages_dropped_total", &[]).unwrap();
    assert_eq!(scrape.sum("ringmq_message_drops_total"), total);
    assert_eq!(scrape.value("ringmq_sessions", &[]), Some(2.0));
}

/// Refused logins and sockets refused at `connection.max_connections` are counted by reason,
/// so a brute-force attempt or a connection flood shows in the metrics.
#[test]
fn refused_connections_are_counted_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let passwd = dir.path().join("passwd");
    crate::passwords::passwd_file(&passwd, "alice", "right");
    let broker = TestBroker::with_config(&format!(
        "{HTTP}[auth]\npassword_file = {:?}\n[connection]\nmax_connections = 1\n",
        passwd.display().to_string()
    ));
    for attempt in 0..3 {
        let mut connect = crate::client::connect_packet(V5, &format!("guess-{attempt}"), true);
        connect.username = Some(crate::client::s("alice"));
        connect.password = Some(bytes::Bytes::from_static(b"wrong"));
        let (_, connack) = RawClient::connect(broker.addr(), connect);
        assert_eq!(
            connack.reason_code,
            codec::ReasonCode::BadUserNameOrPassword
        );
        // The broker closes the refused connection; its one slot comes back.
        scrape_until(&broker, "the refused connection closed", |s| {
            s.value("ringmq_connections_open", &[]) == Some(0.0)
        });
    }
    let mut connect = crate::client::connect_packet(V5, "alice-in", true);
    connect.username = Some(crate::client::s("alice"));
    connect.password = Some(bytes::Bytes::from_static(b"right"));
    let _holds_the_one_slot = RawClient::connected(broker.addr(), connect);
    // The second socket is closed at accept, before any CONNACK.
    let mut refused = TcpStream::connect(broker.addr()).unwrap();
    refused
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(
        refused.read(&mut [0; 16]).unwrap_or(0),
        0,
        "closed at accept"
    );
    let scrape = scrape_until(&broker, "the refusals", |s| {
        s.value(
            "ringmq_connects_refused_total",
            &[("reason", "max_connections")],
        ) >= Some(1.0)
    });
    let refused = |reason| scrape.value("ringmq_connects_refused_total", &[("reason", reason)]);
    assert_eq!(refused("bad_credentials"), Some(3.0));
    assert_eq!(refused("max_connections"), Some(1.0));
    assert_eq!(refused("not_authorized"), Some(0.0));
}

#[test]
fn health_and_readiness() {
    let broker = TestBroker::with_config(HTTP);
    let addr = broker.http_addr();
    let health = get(addr, "/healthz", "");
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    assert_eq!(get(addr, "/readyz", "").status, 200);
    broker.stop();
    assert_eq!(get(addr, "/readyz", "").status, 503, "shutting down");
}

#[test]
fn credentials_are_required_for_metrics_but_not_for_health() {
    let broker = TestBroker::with_config(&format!(
        "{HTTP}token = \"s3cret\"\nusername = \"ops\"\npassword = \"pw\"\n"
    ));
    let addr = broker.http_addr();
    let refused = get(addr, "/metrics", "");
    assert_eq!(refused.status, 401);
    assert!(refused.header("www-authenticate").is_some());
    assert_eq!(
        get(addr, "/metrics", "Authorization: Bearer wrong\r\n").status,
        401
    );
    assert_eq!(get(addr, "/api/v1/clients", "").status, 401);
    assert_eq!(
        get(addr, "/metrics", "Authorization: Bearer s3cret\r\n").status,
        200
    );
    let basic = base64::engine::general_purpose::STANDARD.encode("ops:pw");
    let header = format!("Authorization: Basic {basic}\r\n");
    assert_eq!(get(addr, "/metrics", &header).status, 200);
    assert_eq!(get(addr, "/healthz", "").status, 200);
    assert_eq!(get(addr, "/readyz", "").status, 200);
    let _client = RawClient::connected_clean(broker.addr(), V5, "seen-by-the-api");
    let clients = get(addr, "/api/v1/clients", "Authorization: Bearer s3cret\r\n");
    assert_eq!(clients.status, 200, "{}", clients.body);
    assert!(
        clients.body.contains("\"seen-by-the-api\""),
        "{}",
        clients.body
    );
    let kicked = exchange(
        addr,
        b"DELETE /api/v1/clients/seen-by-the-api HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer s3cret\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(kicked.status, 200, "{}", kicked.body);
}

#[test]
fn a_public_bind_without_credentials_refuses_to_start() {
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("base", BASE).unwrap());
    raw.overlay(parse_raw("t", "[http]\nbind = \"0.0.0.0:0\"\n").unwrap());
    let error = raw.validate().unwrap_err().to_string();
    assert!(error.contains("http.token"), "{error}");
}

#[test]
fn bad_requests_get_4xx_and_the_broker_keeps_serving() {
    let broker = TestBroker::with_config(&format!(
        "{HTTP}max_head_bytes = 1024\nmax_body_bytes = 16\n"
    ));
    let addr = broker.http_addr();
    assert_eq!(exchange(addr, b"NONSENSE\r\n\r\n").status, 400);
    assert_eq!(
        exchange(addr, b"GET / HTTP/1.1\r\n\r\n").status,
        400,
        "no Host"
    );
    let huge = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\nX: {}\r\n\r\n",
        "a".repeat(2000)
    );
    assert_eq!(exchange(addr, huge.as_bytes()).status, 431);
    let body = b"POST /api/v1/publish HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n";
    assert_eq!(exchange(addr, body).status, 413);
    assert_eq!(get(addr, "/nowhere", "").status, 404);
    assert_eq!(get(addr, "/api/v1/nothing-here", "").status, 404);
    assert_eq!(get(addr, "/metrics%zz", "").status, 400);
    let post = exchange(
        addr,
        b"POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(post.status, 405);
    assert_eq!(post.header("allow"), Some("GET, HEAD"));

    // Keep-alive: two requests on one connection, then the broker still serves MQTT.
    let mut stream = connect(addr);
    let twice = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\nGET /readyz HTTP/1.1\r\nHost: localhost\r\n\r\n";
    stream.write_all(twice.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    assert_eq!(read_answer(&mut reader).status, 200);
    assert_eq!(read_answer(&mut reader).status, 200);
    broker.assert_serving();
    assert_eq!(get(addr, "/healthz", "").status, 200);
}

#[test]
fn a_connection_beyond_the_bound_closes_the_one_waiting_longest() {
    let broker = TestBroker::with_config(&format!("{HTTP}max_connections = 1\n"));
    let addr = broker.http_addr();
    let mut held = connect(addr);
    held.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut held = BufReader::new(held);
    assert_eq!(read_answer(&mut held).status, 200, "kept alive");
    // The held connection waits for its next request: the newcomer takes its place.
    assert_eq!(get(addr, "/healthz", "").status, 200);
    let mut rest = Vec::new();
    assert_eq!(held.read_to_end(&mut rest).unwrap_or(0), 0, "closed");
}

#[test]
fn store_figures_appear_with_persistence() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::with_store(&format!(
        "{HTTP}[persistence]\nengine = \"redb\"\ndir = {:?}\n",
        dir.path().display().to_string()
    ));
    let mut client = RawClient::connected(broker.addr(), persistent_connect(V5, "ops-stored", 600));
    client.subscribe("ops/stored", QoS::AtLeastOnce);
    let scrape = scrape_until(&broker, "a store commit", |s| {
        s.value("ringmq_store_commits_total", &[]) >= Some(1.0)
    });
    assert!(scrape.value("ringmq_store_commit_duration_seconds_count", &[]) >= Some(1.0));
    assert!(scrape.value("ringmq_store_size_bytes", &[]) > Some(0.0));
}

/// A rustls client trusting `pki`'s CA.
fn tls_client(
    pki: &TestPki,
    addr: SocketAddr,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    crate::pki::tls_client_stream(pki, connect(addr))
}

#[test]
fn https_with_a_generated_certificate() {
    let pki = TestPki::new();
    let broker = TestBroker::with_config(&format!(
        "{HTTP}tls_cert_file = {:?}\ntls_key_file = {:?}\ntoken = \"t\"\n",
        pki.server.cert.display().to_string(),
        pki.server.key.display().to_string()
    ));
    let mut tls = tls_client(&pki, broker.http_addr());
    let request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer t\r\n\r\n\
                   GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    tls.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(tls);
    let metrics = read_answer(&mut reader);
    assert_eq!(metrics.status, 200);
    Scrape::parse(&metrics.body).unwrap();
    assert_eq!(read_answer(&mut reader).status, 200);

    // Plain HTTP on the HTTPS port gets no answer, and the listener goes on.
    let mut plain = connect(broker.http_addr());
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut byte = [0u8; 64];
    let read = plain.read(&mut byte).unwrap_or(0);
    assert!(!String::from_utf8_lossy(&byte[..read]).starts_with("HTTP/1.1 200"));
    let mut again = BufReader::new(tls_client(&pki, broker.http_addr()));
    again
        .get_mut()
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_answer(&mut again).status, 200);
}

#[test]
fn bridge_figures_are_in_the_metrics() {
    let remote = TestBroker::start();
    let config = format!(
        "{HTTP}[[bridges]]\nname = \"up\"\naddress = \"{}\"\nclient_id = \"bridge-up\"\n\
         reconnect_min_ms = 100\nreconnect_max_ms = 1000\n\
         topics = [{{ pattern = \"a/#\", direction = \"out\", qos = 1 }}]\n",
        remote.addr()
    );
    let local = TestBroker::with_config(&config);
    let bridge = [("bridge", "up")];
    scrape_until(&local, "the bridge is connected", |s| {
        s.value("ringmq_bridge_connected", &bridge) == Some(1.0)
    });
    let mut listener = RawClient::connected_clean(remote.addr(), V5, "listener");
    listener.subscribe("a/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(local.addr(), V5, "publisher");
    publisher.publish_simple("a/1", b"x", QoS::AtLeastOnce);
    assert_eq!(listener.expect_publish_acked().payload(), b"x");
    let scrape = scrape_until(&local, "the message is counted out", |s| {
        s.value("ringmq_bridge_messages_out_total", &bridge) == Some(1.0)
    });
    assert_eq!(
        scrape.value("ringmq_bridge_dropped_total", &bridge),
        Some(0.0)
    );
    assert!(
        scrape
            .value("ringmq_bridge_reconnects_total", &bridge)
            .is_some()
    );
}
