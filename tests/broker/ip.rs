//! `[ip]`: address deny and allow lists, the per-address connection limit and connect rate, and
//! the ban after failed logins; refused connections are closed at accept, before any MQTT.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use codec::{Packet, ReasonCode};
use socket2::{Domain, Socket, Type};

use crate::client::{RawClient, V5, connect_packet, s};
use crate::harness::{TestBroker, wait_until};

pub(crate) fn loopback(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

/// A TCP connection to `addr` from `source`.
pub(crate) fn stream_from(source: IpAddr, addr: SocketAddr) -> TcpStream {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(source, 0).into()).unwrap();
    socket.connect(&addr.into()).unwrap();
    let stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Sends a CONNECT from `source` with `login`; the CONNACK's reason, or `None` when the
/// broker closed the connection without one.
pub(crate) fn try_connect(
    broker: &TestBroker,
    source: IpAddr,
    login: Option<(&str, &str)>,
) -> Option<ReasonCode> {
    connect_over(stream_from(source, broker.addr()), login)
}

/// Sends a CONNECT with `login` over `stream` (after whatever the test sent first); the
/// CONNACK's reason, or `None` when the broker closed the connection without one.
pub(crate) fn connect_over(
    mut stream: TcpStream,
    login: Option<(&str, &str)>,
) -> Option<ReasonCode> {
    let mut connect = connect_packet(V5, "door", true);
    if let Some((user, password)) = login {
        connect.username = Some(s(user));
        connect.password = Some(bytes::Bytes::copy_from_slice(password.as_bytes()));
    }
    let mut frame = bytes::BytesMut::new();
    codec::encode(&Packet::Connect(Box::new(connect)), V5, &mut frame).unwrap();
    // A connection refused at accept may be reset before or while this is written.
    let _ = stream.write_all(&frame);
    let mut received = Vec::new();
    let mut buf = [0; 256];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                received.extend_from_slice(&buf[..n]);
                let mut bytes = bytes::BytesMut::from(&received[..]);
                if let Ok(Some(Packet::ConnAck(ack))) =
                    codec::decode(&mut bytes, &codec::Limits::new(V5))
                {
                    return Some(ack.reason_code);
                }
            }
        }
    }
    assert!(
        received.is_empty(),
        "nothing but a CONNACK may come back: {received:?}"
    );
    None
}

#[test]
fn deny_and_allow_lists_close_connections_at_accept() {
    let broker = TestBroker::with_config("[ip]\ndeny = [\"127.0.0.2\", \"10.0.0.0/8\"]\n");
    assert_eq!(try_connect(&broker, loopback(2), None), None);
    assert_eq!(
        try_connect(&broker, loopback(3), None),
        Some(ReasonCode::Success)
    );
    let broker = TestBroker::with_config("[ip]\nallow = [\"127.0.0.1/32\"]\n");
    assert_eq!(try_connect(&broker, loopback(3), None), None);
    assert_eq!(
        try_connect(&broker, loopback(1), None),
        Some(ReasonCode::Success)
    );
    broker.assert_serving();
}

#[test]
fn a_reload_applies_new_lists_and_limits() {
    let broker = TestBroker::with_config("[ip]\ndeny = [\"127.0.0.2\"]\n");
    assert_eq!(try_connect(&broker, loopback(2), None), None);
    broker.apply_reloadable("[ip]\ndeny = [\"127.0.0.3\"]\n");
    assert_eq!(
        try_connect(&broker, loopback(2), None),
        Some(ReasonCode::Success)
    );
    assert_eq!(try_connect(&broker, loopback(3), None), None);
}

#[test]
fn an_address_holds_at_most_max_connections() {
    let broker = TestBroker::with_config("[ip]\nmax_connections = 2\n");
    let first = RawClient::connected_clean(broker.addr(), V5, "one");
    let _second = RawClient::connected_clean(broker.addr(), V5, "two");
    assert_eq!(try_connect(&broker, loopback(1), None), None);
    // Another address is not affected.
    assert_eq!(
        try_connect(&broker, loopback(4), None),
        Some(ReasonCode::Success)
    );
    first.disconnect();
    wait_until("a slot freed by the closed connection", || {
        try_connect(&broker, loopback(1), None)
            .map(|reason| assert_eq!(reason, ReasonCode::Success))
    });
}

#[test]
fn the_connect_rate_of_an_address_is_bounded() {
    let broker = TestBroker::with_manual_clock("[ip]\nmax_connect_rate = 3\n");
    for _ in 0..3 {
        assert_eq!(
            try_connect(&broker, loopback(5), None),
            Some(ReasonCode::Success)
        );
    }
    assert_eq!(try_connect(&broker, loopback(5), None), None);
    assert_eq!(
        try_connect(&broker, loopback(6), None),
        Some(ReasonCode::Success)
    );
    broker.advance(Duration::from_secs(1));
    assert_eq!(
        try_connect(&broker, loopback(5), None),
        Some(ReasonCode::Success)
    );
}

#[test]
fn repeated_failed_logins_ban_the_address_for_a_while() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("passwd");
    let status = std::process::Command::new("mosquitto_passwd")
        .arg("-c")
        .arg("-b")
        .arg(&file)
        .args(["alice", "s3cret"])
        .status()
        .expect("mosquitto_passwd runs (Debian's mosquitto package)");
    assert!(status.success());
    let broker = TestBroker::with_manual_clock(&format!(
        "[auth]\npassword_file = {:?}\n[ip]\nban_after_auth_failures = 2\nban_duration = 60\n",
        file.display().to_string()
    ));
    let right = Some(("alice", "s3cret"));
    let wrong = Some(("alice", "guess"));
    assert_eq!(
        try_connect(&broker, loopback(7), wrong),
        Some(ReasonCode::BadUserNameOrPassword)
    );
    assert_eq!(
        try_connect(&broker, loopback(7), wrong),
        Some(ReasonCode::BadUserNameOrPassword)
    );
    // Banned: even the right password is not heard.
    assert_eq!(try_connect(&broker, loopback(7), right), None);
    assert_eq!(
        try_connect(&broker, loopback(8), right),
        Some(ReasonCode::Success)
    );
    broker.advance(Duration::from_secs(61));
    assert_eq!(
        try_connect(&broker, loopback(7), right),
        Some(ReasonCode::Success)
    );
}

/// A password file with alice (s3cret) and bob (hunter2).
fn two_users(dir: &std::path::Path) -> std::path::PathBuf {
    let file = dir.join("passwd");
    crate::passwords::passwd_file(&file, "alice", "s3cret");
    let status = std::process::Command::new("mosquitto_passwd")
        .arg("-b")
        .arg(&file)
        .args(["bob", "hunter2"])
        .status()
        .expect("mosquitto_passwd runs (Debian's mosquitto package)");
    assert!(status.success());
    file
}

/// Failed logins from `source` (`login(i)` for guess i) answered 0x86 before the first other
/// answer, at most `max`; and that answer.
fn guesses_heard(
    broker: &TestBroker,
    source: IpAddr,
    max: usize,
    login: impl Fn(usize) -> (String, String),
) -> (usize, Option<ReasonCode>) {
    for i in 0..max {
        let (user, password) = login(i);
        let answer = try_connect(broker, source, Some((&user, &password)));
        if answer != Some(ReasonCode::BadUserNameOrPassword) {
            return (i, answer);
        }
    }
    (max, Some(ReasonCode::BadUserNameOrPassword))
}

/// With the default `[ip]` settings: 10 wrong passwords for one username from one address bar
/// that username there (0x8A, unheard: even the right password), other usernames still log in;
/// 100 failures from the address in all ban it (closed at accept). Other addresses unaffected.
#[test]
fn default_settings_stop_password_guessing_per_username_and_per_address() {
    let dir = tempfile::tempdir().unwrap();
    let file = two_users(dir.path());
    let broker = TestBroker::with_config(&format!(
        "[auth]\npassword_file = {:?}\n",
        file.display().to_string()
    ));
    let guesser = loopback(9);
    let (heard, then) = guesses_heard(&broker, guesser, 1000, |i| {
        ("alice".into(), format!("guess{i}"))
    });
    assert_eq!((heard, then), (10, Some(ReasonCode::Banned)));
    assert_eq!(
        try_connect(&broker, guesser, Some(("alice", "s3cret"))),
        Some(ReasonCode::Banned),
        "a barred username is refused unheard"
    );
    assert_eq!(
        try_connect(&broker, guesser, Some(("bob", "hunter2"))),
        Some(ReasonCode::Success),
        "another username from the same address still logs in"
    );
    // Guessing across usernames: the address is banned at 100 failures in all.
    let (heard, then) = guesses_heard(&broker, guesser, 1000, |i| {
        (format!("user{i}"), "guess".into())
    });
    assert_eq!((heard, then), (90, None));
    assert_eq!(
        try_connect(&broker, guesser, Some(("bob", "hunter2"))),
        None
    );
    assert_eq!(
        try_connect(&broker, loopback(10), Some(("alice", "s3cret"))),
        Some(ReasonCode::Success)
    );
    assert_eq!(
        broker.ip_bans_total(),
        2,
        "one username bar and one address ban counted"
    );
}

#[test]
fn an_exempt_address_is_never_banned() {
    let dir = tempfile::tempdir().unwrap();
    let file = two_users(dir.path());
    let broker = TestBroker::with_config(&format!(
        "[auth]\npassword_file = {:?}\n[ip]\nexempt = [\"127.0.0.11/32\"]\n\
         ban_after_auth_failures = 2\nban_user_after_auth_failures = 2\n",
        file.display().to_string()
    ));
    let (heard, _) = guesses_heard(&broker, loopback(11), 20, |i| {
        ("alice".into(), format!("guess{i}"))
    });
    assert_eq!(heard, 20);
    assert_eq!(
        try_connect(&broker, loopback(11), Some(("alice", "s3cret"))),
        Some(ReasonCode::Success)
    );
    // The same settings ban an address not listed.
    let (heard, then) = guesses_heard(&broker, loopback(12), 20, |i| {
        ("alice".into(), format!("guess{i}"))
    });
    assert_eq!((heard, then), (2, None));
}

/// The count of an IPv6 address (kept beside the connection's record, not in it) is given back
/// when a connection closes.
#[test]
fn an_ipv6_address_holds_at_most_max_connections_too() {
    let broker =
        TestBroker::with_config("[listeners]\ntcp = [\"[::1]:0\"]\n[ip]\nmax_connections = 2\n");
    let addr = broker.addr();
    let dial = || {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    };
    let first = RawClient::connected_clean(addr, V5, "one");
    let _second = RawClient::connected_clean(addr, V5, "two");
    assert_eq!(connect_over(dial(), None), None);
    first.disconnect();
    wait_until("a slot freed by the closed connection", || {
        connect_over(dial(), None).map(|reason| assert_eq!(reason, ReasonCode::Success))
    });
}
