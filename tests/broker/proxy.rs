//! The PROXY protocol (`listeners.proxy_tcp`, `proxy_protocol = true`) behind a real HAProxy
//! in TCP mode (`send-proxy` and `send-proxy-v2`): the address of the client behind it is the one
//! the `[ip]` rules and the admin API see; a connection without a header, or a header from an
//! address outside `listeners.proxy_trusted`, is refused; TLS behind HAProxy works.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use codec::{Packet, ReasonCode};
use ringmq::metrics::Refusal;
use serde_json::Value;

use crate::client::{RawClient, V5, connect_packet};
use crate::harness::{TestBroker, wait_until};
use crate::ip::{connect_over, loopback, stream_from};
use crate::pki::{TestPki, tls_client_stream};
use crate::ports::free_port;

/// HAProxy in TCP mode on a loopback port, in front of one broker listener; killed at drop.
struct HaProxy {
    child: Child,
    front: SocketAddr,
    _dir: tempfile::TempDir,
}

impl HaProxy {
    /// Forwards to `broker` with `send` (`send-proxy` or `send-proxy-v2`).
    fn start(broker: SocketAddr, send: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let front = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let config = format!(
            "global\n  maxconn 64\n\
             defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
             frontend mqtt\n  bind {front}\n  default_backend broker\n\
             backend broker\n  server broker {broker} {send}\n"
        );
        let file = dir.path().join("haproxy.cfg");
        std::fs::write(&file, config).unwrap();
        let child = Command::new(haproxy())
            .arg("-db")
            .arg("-f")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts (scripts/test.d/00-tools.sh installs it)");
        wait_until("haproxy listens", || TcpStream::connect(front).ok());
        Self {
            child,
            front,
            _dir: dir,
        }
    }
}

impl Drop for HaProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the tools script leaves HAProxy: on the PATH or in `/usr/sbin` (Debian's package).
fn haproxy() -> PathBuf {
    let on_path = Command::new("haproxy")
        .arg("-v")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    match on_path {
        true => PathBuf::from("haproxy"),
        false => PathBuf::from("/usr/sbin/haproxy"),
    }
}

/// A broker with a plain TCP listener (its first address) and one behind a balancer (its
/// second), with `extra` TOML.
fn proxied_broker(extra: &str) -> (TestBroker, SocketAddr) {
    let broker = TestBroker::with_config(&format!(
        "[listeners]\nproxy_tcp = [\"127.0.0.1:0\"]\n{extra}"
    ));
    let proxied = broker.local_addrs()[1];
    (broker, proxied)
}

/// The address the admin API lists for `client_id`.
fn listed_address(broker: &TestBroker, client_id: &str) -> String {
    let request = ringmq::admin::AdminRequest {
        method: "GET",
        path: &format!("/api/v1/clients/{client_id}"),
        query: &[],
        body: b"",
    };
    let answer = broker.admin().route(&request).unwrap();
    let body: Value = serde_json::from_str(&answer.body).unwrap();
    body["address"].as_str().unwrap_or_default().to_owned()
}

/// A client connected as `client_id` from `source` over `stream`.
fn connected(stream: TcpStream, client_id: &str) -> RawClient {
    let mut client = RawClient::over(stream, V5);
    client.send(&Packet::Connect(Box::new(connect_packet(
        V5, client_id, true,
    ))));
    assert_eq!(client.expect_connack().reason_code, ReasonCode::Success);
    client
}

fn source_of(address: &str) -> IpAddr {
    address.parse::<SocketAddr>().unwrap().ip()
}

#[test]
fn haproxy_v1_and_v2_name_the_client_to_the_ip_rules_and_the_admin_api() {
    let (broker, proxied) = proxied_broker("[ip]\ndeny = [\"127.0.0.7\"]\n");
    for send in ["send-proxy", "send-proxy-v2"] {
        let haproxy = HaProxy::start(proxied, send);
        let denied = connect_over(stream_from(loopback(7), haproxy.front), None);
        assert_eq!(denied, None, "{send}: 127.0.0.7 is denied behind haproxy");
        let client = connected(stream_from(loopback(8), haproxy.front), "behind");
        let address = wait_until("the admin API lists the client", || {
            Some(listed_address(&broker, "behind")).filter(|a| !a.is_empty())
        });
        assert_eq!(source_of(&address), loopback(8), "{send}: {address}");
        client.disconnect();
    }
    // The plain listener still takes direct clients (127.0.0.1 is not denied).
    assert_eq!(
        connect_over(stream_from(loopback(1), broker.addr()), None),
        Some(ReasonCode::Success)
    );
    assert_eq!(broker.refused(Refusal::ProxyProtocol), 0);
}

#[test]
fn a_connection_without_a_header_is_refused_and_counted() {
    let (broker, proxied) = proxied_broker("");
    assert_eq!(connect_over(stream_from(loopback(1), proxied), None), None);
    let mut garbage = stream_from(loopback(1), proxied);
    garbage
        .write_all(b"PROXY TCP4 127.0.0.8 127.0.0.1 01 1883\r\n")
        .unwrap();
    assert_eq!(connect_over(garbage, None), None);
    wait_until("both refusals are counted", || {
        (broker.refused(Refusal::ProxyProtocol) == 2).then_some(())
    });
}

#[test]
fn a_header_is_believed_only_from_a_trusted_address_and_may_arrive_in_pieces() {
    let (broker, proxied) = proxied_broker("proxy_trusted = [\"127.0.0.5\"]\n");
    let header = b"PROXY TCP4 127.0.0.8 127.0.0.1 40000 1883\r\n";
    let mut untrusted = stream_from(loopback(1), proxied);
    // The broker may close an untrusted address's connection before the header is written
    // (it knows the address at accept): the write may then fail with a reset.
    let _ = untrusted.write_all(header);
    assert_eq!(connect_over(untrusted, None), None);
    assert_eq!(broker.refused(Refusal::ProxyProtocol), 1);
    let mut trusted = stream_from(loopback(5), proxied);
    trusted.write_all(&header[..9]).unwrap();
    trusted.flush().unwrap();
    std::thread::sleep(Duration::from_millis(50));
    trusted.write_all(&header[9..]).unwrap();
    let client = connected(trusted, "pieces");
    assert_eq!(listed_address(&broker, "pieces"), "127.0.0.8:40000");
    client.disconnect();
}

#[test]
fn tls_behind_haproxy_with_send_proxy_v2() {
    let pki = TestPki::new();
    let broker = TestBroker::with_config(&format!(
        "[ip]\ndeny = [\"127.0.0.7\"]\n\
         [[listeners.tls]]\nbind = \"127.0.0.1:0\"\nproxy_protocol = true\n{}",
        pki.listener_keys()
    ));
    let haproxy = HaProxy::start(broker.addr_of("tls"), "send-proxy-v2");
    let mut tls = tls_client_stream(&pki, stream_from(loopback(8), haproxy.front));
    let mut frame = bytes::BytesMut::new();
    let connect = Packet::Connect(Box::new(connect_packet(V5, "tls-behind", true)));
    codec::encode(&connect, V5, &mut frame).unwrap();
    tls.write_all(&frame).unwrap();
    let mut received = bytes::BytesMut::new();
    let ack = wait_until("a CONNACK over TLS", || {
        let mut buf = [0u8; 64];
        let n = std::io::Read::read(&mut tls, &mut buf).ok()?;
        received.extend_from_slice(&buf[..n]);
        match codec::decode(&mut received, &codec::Limits::new(V5)) {
            Ok(Some(Packet::ConnAck(ack))) => Some(ack.reason_code),
            _ => None,
        }
    });
    assert_eq!(ack, ReasonCode::Success);
    assert_eq!(
        source_of(&listed_address(&broker, "tls-behind")),
        loopback(8)
    );
    let mut denied = tls_client_stream(&pki, stream_from(loopback(7), haproxy.front));
    let refused = denied.write_all(&frame).and_then(|()| {
        let mut buf = [0u8; 16];
        std::io::Read::read(&mut denied, &mut buf)
    });
    assert!(
        matches!(refused, Ok(0) | Err(_)),
        "127.0.0.7 is denied: {refused:?}"
    );
}
