//! The QUIC client driver on a real runtime: a [`QuicClientDriver`] per shard on a client
//! endpoint (`RuntimeConfig::datagram_clients`) connects, through ring-runtime's outbound
//! virtual connections, to [`QuicDriver`]s serving an echo handler on another runtime; the
//! stream's bytes go both ways, through the stream's flow control, and the connection closes.
//! A server certificate for another name fails the connect.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

#[path = "support/quic_client.rs"]
mod quic_client;

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{
    CloseReason, ConnId, DatagramListen, Handler, Runtime, RuntimeConfig, RuntimeHandle, ShardCtx,
    ShardId,
};
use transport::quic::{QuicConnector, QuicDriver};
use transport::{ClientError, ClientSettings};

use quic_client::Pki;

/// A bound against hangs, never a measured time.
const HANG: Duration = Duration::from_secs(20);

/// Sends back every byte it reads; counts what it accepted and closed.
struct Echo(Arc<AtomicUsize>, Arc<AtomicUsize>);

impl Handler for Echo {
    type Message = ();

    fn on_accept(&mut self, _: &mut ShardCtx<()>, _: ConnId, _: SocketAddr) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        let _ = ctx.send(conn, data);
    }

    fn on_closed(&mut self, _: &mut ShardCtx<()>, _: ConnId, _: CloseReason) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

/// The echo server: its runtime, address, and counts of accepted and closed connections.
struct Server {
    handle: RuntimeHandle<()>,
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
}

fn serve(pki: &Pki) -> Server {
    let listener = pki.listener_config();
    let config = RuntimeConfig {
        shards: Some(2),
        datagram_listen: vec![DatagramListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            driver: Arc::new(move |setup| Box::new(QuicDriver::new(listener.clone(), setup))),
        }],
        ..RuntimeConfig::default()
    };
    let (accepted, closed) = (Arc::default(), Arc::default());
    let counts = (Arc::clone(&accepted), Arc::clone(&closed));
    let handle = Runtime::start(config, move |_| {
        Echo(Arc::clone(&counts.0), Arc::clone(&counts.1))
    })
    .unwrap();
    let addr = handle.datagram_addrs()[0];
    Server {
        handle,
        addr,
        accepted,
        closed,
    }
}

/// What the test asks of the dialing shard.
enum Ask {
    Connect(SocketAddr),
    Send(ConnId, Bytes),
    Close(ConnId),
}

/// What the dialing handler saw.
#[derive(Debug)]
enum Saw {
    Connected(ConnId, Result<(), ErrorKind>),
    Data(Vec<u8>),
    Closed(CloseReason),
}

/// Connects, sends and closes when asked; reports everything.
struct Dialer {
    endpoint: usize,
    saw: Sender<Saw>,
}

impl Handler for Dialer {
    type Message = Ask;

    fn on_accept(&mut self, _: &mut ShardCtx<Ask>, _: ConnId, _: SocketAddr) {}

    fn on_messages(&mut self, ctx: &mut ShardCtx<Ask>, messages: Vec<Ask>) {
        for ask in messages {
            match ask {
                Ask::Connect(server) => {
                    ctx.connect_datagram(self.endpoint, server).unwrap();
                }
                Ask::Send(conn, data) => ctx.send(conn, data).unwrap(),
                Ask::Close(conn) => ctx.close(conn),
            }
        }
    }

    fn on_connected(&mut self, _: &mut ShardCtx<Ask>, conn: ConnId, result: std::io::Result<()>) {
        let _ = self
            .saw
            .send(Saw::Connected(conn, result.map_err(|e| e.kind())));
    }

    fn on_data(&mut self, _: &mut ShardCtx<Ask>, _: ConnId, data: Bytes) {
        let _ = self.saw.send(Saw::Data(data.to_vec()));
    }

    fn on_closed(&mut self, _: &mut ShardCtx<Ask>, _: ConnId, reason: CloseReason) {
        let _ = self.saw.send(Saw::Closed(reason));
    }
}

/// A one-shard runtime with a QUIC client endpoint trusting `pki`'s certificate under
/// `server_name`.
fn dialer(pki: &Pki, server_name: &str) -> (RuntimeHandle<Ask>, Receiver<Saw>) {
    let settings = ClientSettings {
        tls_ca: Some(pki.cert.clone()),
        tls_server_name: Some(server_name.to_owned()),
        ws: None,
    };
    let connector = QuicConnector::new(&settings).unwrap();
    let config = RuntimeConfig {
        shards: Some(1),
        datagram_clients: vec![DatagramListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            driver: connector.driver_factory(),
        }],
        ..RuntimeConfig::default()
    };
    let endpoint = config.datagram_client_endpoint(0);
    let (saw, reports) = mpsc::channel();
    let handle = Runtime::start(config, move |_| Dialer {
        endpoint,
        saw: saw.clone(),
    })
    .unwrap();
    (handle, reports)
}

fn ask(handle: &RuntimeHandle<Ask>, what: Ask) {
    handle.post(ShardId::new(0), vec![what]).ok().unwrap();
}

fn next(reports: &Receiver<Saw>) -> Saw {
    reports
        .recv_timeout(HANG)
        .expect("a report within the bound")
}

#[test]
fn a_quic_client_connection_carries_the_stream_both_ways() {
    let pki = Pki::new();
    let server = serve(&pki);
    let (handle, reports) = dialer(&pki, "localhost");
    ask(&handle, Ask::Connect(server.addr));
    let Saw::Connected(conn, Ok(())) = next(&reports) else {
        panic!("the connect succeeds");
    };
    // Longer than the stream windows: flow control holds bytes on both sides.
    let long: Vec<u8> = (0..3_000_000u32).map(|n| (n % 251) as u8).collect();
    ask(&handle, Ask::Send(conn, Bytes::from(long.clone())));
    let mut echoed = Vec::new();
    while echoed.len() < long.len() {
        match next(&reports) {
            Saw::Data(data) => echoed.extend_from_slice(&data),
            other => panic!("echoed bytes expected, saw {other:?}"),
        }
    }
    assert!(echoed == long, "the echo is the stream, in order");
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
    ask(&handle, Ask::Close(conn));
    assert!(matches!(next(&reports), Saw::Closed(CloseReason::Local)));
    quic_client::wait_until("the server sees the close", || {
        server.closed.load(Ordering::SeqCst) == 1
    });
    handle.shutdown();
    handle.join().unwrap();
    server.handle.shutdown();
    server.handle.join().unwrap();
}

#[test]
fn a_certificate_for_another_name_fails_the_connect() {
    let pki = Pki::new();
    let server = serve(&pki);
    let (handle, reports) = dialer(&pki, "elsewhere.example");
    ask(&handle, Ask::Connect(server.addr));
    assert!(matches!(
        next(&reports),
        Saw::Connected(_, Err(ErrorKind::InvalidData))
    ));
    handle.shutdown();
    handle.join().unwrap();
    assert!(
        reports.try_iter().next().is_none(),
        "a failed connect is not closed"
    );
    assert_eq!(server.accepted.load(Ordering::SeqCst), 0);
    server.handle.shutdown();
    server.handle.join().unwrap();
}

#[test]
fn quic_needs_a_ca_file_and_no_websocket() {
    let pki = Pki::new();
    let mut settings = ClientSettings::default();
    let no_ca = QuicConnector::new(&settings).unwrap_err();
    assert!(matches!(no_ca, ClientError::Quic(_)), "{no_ca}");
    settings.tls_ca = Some(pki.cert.clone());
    settings.ws = Some("/mqtt".to_owned());
    let ws = QuicConnector::new(&settings).unwrap_err();
    assert!(matches!(ws, ClientError::Quic(_)), "{ws}");
    settings.ws = None;
    settings.tls_server_name = Some("not a name!".to_owned());
    let name = QuicConnector::new(&settings).unwrap_err();
    assert!(matches!(name, ClientError::ServerName { .. }), "{name}");
}
