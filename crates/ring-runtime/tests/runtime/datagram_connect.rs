//! Outbound virtual connections ([`ring_runtime::ShardCtx::connect_datagram`]) over real UDP
//! sockets on loopback: the toy client driver of `toy_datagram_client.rs`, on a client
//! endpoint, connects to the toy server of `toy_datagram.rs`.

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc::{self, Receiver};

use ring_runtime::{CloseReason, ConnId, DatagramListen, RuntimeConfig, RuntimeHandle, ShardId};

use crate::common::{HANG, config, pattern, start, wait_until};
use crate::datagram::{stop, toy_runtime};
use crate::toy_datagram::{Log, ToyDriver};
use crate::toy_datagram_client::{Dial, HANDSHAKE_TIMEOUT, Seen, ToyClientDriver, ToyDialer};

/// The dialing runtime's endpoints: 0 listens (the toy server's driver, which does not
/// connect out), 1 is the client endpoint.
const SERVER_ONLY_ENDPOINT: usize = 0;

/// A runtime of `shards` shards with a listening toy endpoint and a client endpoint, and the
/// client endpoint's index.
fn dialer(shards: usize) -> Option<(RuntimeHandle<Dial>, Receiver<Seen>, usize)> {
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let config = RuntimeConfig {
        listen: Vec::new(),
        datagram_listen: vec![DatagramListen {
            addr: loopback,
            driver: ToyDriver::factory(Log::default()),
        }],
        datagram_clients: vec![DatagramListen {
            addr: loopback,
            driver: ToyClientDriver::factory(),
        }],
        ..config(shards)
    };
    let client_endpoint = config.datagram_client_endpoint(0);
    let (seen, reports) = mpsc::channel();
    let handle = start(config, move |_| ToyDialer { seen: seen.clone() })?;
    Some((handle, reports, client_endpoint))
}

/// The next report, ids given by `connect_datagram` left out.
fn next(reports: &Receiver<Seen>) -> Seen {
    loop {
        match reports
            .recv_timeout(HANG)
            .expect("a report within the hang bound")
        {
            Seen::Asked(_) => {}
            seen => return seen,
        }
    }
}

/// The id the next `connect_datagram` gave.
fn asked(reports: &Receiver<Seen>) -> ConnId {
    match reports
        .recv_timeout(HANG)
        .expect("a report within the hang bound")
    {
        Seen::Asked(conn) => conn,
        other => panic!("a connect's id expected, saw {other:?}"),
    }
}

fn connect(handle: &RuntimeHandle<Dial>, shard: u16, endpoint: usize, peer: SocketAddr) {
    let connect = Dial::Connect {
        endpoint,
        peer,
        payload: b"",
    };
    handle
        .post(ShardId::new(shard), vec![connect])
        .ok()
        .unwrap();
}

/// Connects from `shard` with `payload` queued before the connect ends; returns the
/// connection and its local address.
fn connect_ok(
    handle: &RuntimeHandle<Dial>,
    reports: &Receiver<Seen>,
    shard: u16,
    endpoint: usize,
    peer: SocketAddr,
    payload: &'static [u8],
) -> (ConnId, SocketAddr) {
    let connect = Dial::Connect {
        endpoint,
        peer,
        payload,
    };
    handle
        .post(ShardId::new(shard), vec![connect])
        .ok()
        .unwrap();
    match next(reports) {
        Seen::Connected(conn, Ok(local)) => (conn, local),
        other => panic!("a connect expected, saw {other:?}"),
    }
}

/// Stream bytes of `conn` until `len` have come.
fn read_stream(reports: &Receiver<Seen>, conn: ConnId, len: usize) -> Vec<u8> {
    let mut stream = Vec::new();
    while stream.len() < len {
        match next(reports) {
            Seen::Data(from, data) if from == conn => stream.extend_from_slice(&data),
            other => panic!("bytes of {conn:?} expected, saw {other:?}"),
        }
    }
    stream
}

#[test]
fn an_outbound_virtual_connection_carries_bytes_both_ways() {
    let Some((server_handle, server, log)) = toy_runtime(1, |_| {}) else {
        return;
    };
    let Some((handle, reports, endpoint)) = dialer(2) else {
        return;
    };
    // Frames queued before the connect ends leave once it has.
    let (first, first_local) = connect_ok(&handle, &reports, 0, endpoint, server, b"hello");
    assert_eq!(read_stream(&reports, first, 5), b"hello");
    let (second, second_local) = connect_ok(&handle, &reports, 1, endpoint, server, b"big");
    assert_eq!(read_stream(&reports, second, 5000), pattern(7, 5000));
    assert_ne!(first_local.port(), 0, "port 0 resolved");
    assert_ne!(
        first_local.port(),
        second_local.port(),
        "each shard binds its own port"
    );
    assert_eq!(log.count_prefix("accept on"), 2);
    // The handler's close reaches the server; the server's close reaches the handler.
    handle
        .post(ShardId::new(0), vec![Dial::Close(first)])
        .ok()
        .unwrap();
    assert!(matches!(next(&reports), Seen::Closed(c, CloseReason::Local) if c == first));
    wait_until("the server sees the close", || {
        log.contains("closed PeerClosed")
    });
    stop(server_handle);
    assert!(
        matches!(next(&reports), Seen::Closed(c, CloseReason::PeerClosed) if c == second),
        "the server's goodbye closes the client's connection"
    );
    handle.shutdown();
    handle.join().unwrap();
}

#[test]
fn refused_connects_report_their_error_and_never_close() {
    let Some((server_handle, server, _log)) = toy_runtime(1, |_| {}) else {
        return;
    };
    let Some((handle, reports, endpoint)) = dialer(1) else {
        return;
    };
    connect(&handle, 0, 9, server);
    assert!(matches!(next(&reports), Seen::Refused(ErrorKind::NotFound)));
    // A driver without `on_connect` refuses.
    connect(&handle, 0, SERVER_ONLY_ENDPOINT, server);
    assert!(matches!(
        next(&reports),
        Seen::Connected(_, Err(ErrorKind::Unsupported))
    ));
    // The toy client driver refuses a second connection to the same server.
    let (open, _) = connect_ok(&handle, &reports, 0, endpoint, server, b"");
    connect(&handle, 0, endpoint, server);
    assert!(matches!(
        next(&reports),
        Seen::Connected(_, Err(ErrorKind::AddrInUse))
    ));
    handle.shutdown();
    handle.join().unwrap();
    // Only the connection that opened is closed (by the shutdown).
    let rest: Vec<Seen> = reports.try_iter().collect();
    assert!(
        matches!(&rest[..], [Seen::Closed(c, CloseReason::Shutdown)] if *c == open),
        "{rest:?}"
    );
    stop(server_handle);
}

#[test]
fn a_handshake_without_answer_fails_the_connect() {
    // A socket that never answers.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let Some((handle, reports, endpoint)) = dialer(1) else {
        return;
    };
    connect(&handle, 0, endpoint, silent.local_addr().unwrap());
    assert!(matches!(
        next(&reports),
        Seen::Connected(_, Err(ErrorKind::TimedOut))
    ));
    let mut open = [0; 16];
    let (len, _) = silent.recv_from(&mut open).unwrap();
    assert_eq!(open[0], b'N', "the handshake was sent: {:?}", &open[..len]);
    handle.shutdown();
    let stats = handle.join().unwrap();
    assert_eq!(stats[0].closed, 1, "the failed connect was released");
    assert!(reports.try_iter().next().is_none(), "no on_closed");
}

#[test]
fn a_connection_closed_while_connecting_reports_only_its_close() {
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let peer = silent.local_addr().unwrap();
    let Some((handle, reports, endpoint)) = dialer(1) else {
        return;
    };
    // Closed in the turn that asked: the driver never hears of it.
    let close_at_once = Dial::ConnectAndClose { endpoint, peer };
    handle
        .post(ShardId::new(0), vec![close_at_once])
        .ok()
        .unwrap();
    let first = asked(&reports);
    assert!(matches!(next(&reports), Seen::Closed(c, CloseReason::Local) if c == first));
    // Closed while the driver's handshake runs: the driver forgets it, no connect is reported
    // (not even once the handshake would have timed out).
    connect(&handle, 0, endpoint, peer);
    let second = asked(&reports);
    let mut open = [0; 16];
    silent.recv_from(&mut open).unwrap();
    assert_eq!(open[0], b'N', "the second connect reached the driver");
    handle
        .post(ShardId::new(0), vec![Dial::Close(second)])
        .ok()
        .unwrap();
    assert!(matches!(next(&reports), Seen::Closed(c, CloseReason::Local) if c == second));
    std::thread::sleep(HANDSHAKE_TIMEOUT * 2);
    silent.set_nonblocking(true).unwrap();
    assert!(
        silent.recv_from(&mut open).is_err(),
        "one handshake: the first connect never reached the driver"
    );
    handle.shutdown();
    let stats = handle.join().unwrap();
    assert_eq!(stats[0].closed, 2);
    let rest: Vec<Seen> = reports.try_iter().collect();
    assert!(rest.is_empty(), "{rest:?}");
}
