//! Outbound connections: success (with a local bind), refusal.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;

use bytes::Bytes;
use ring_runtime::{CloseReason, ConnId, Handler, RuntimeConfig, ShardCtx};

use crate::common;

enum Report {
    Connected(std::io::Result<()>),
    Data(Vec<u8>),
    Closed(CloseReason),
}

/// Connects on the first message; sends "ping" once connected; reports everything.
struct Dialer {
    target: SocketAddr,
    local: Option<SocketAddr>,
    reports: mpsc::Sender<Report>,
}

impl Handler for Dialer {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_messages(&mut self, ctx: &mut ShardCtx<()>, _messages: Vec<()>) {
        ctx.connect(self.target, self.local).unwrap();
    }

    fn on_connected(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, result: std::io::Result<()>) {
        if result.is_ok() {
            ctx.send(conn, Bytes::from_static(b"ping")).unwrap();
        }
        self.reports.send(Report::Connected(result)).unwrap();
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        self.reports.send(Report::Data(data.to_vec())).unwrap();
        ctx.close(conn);
    }

    fn on_closed(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, reason: CloseReason) {
        self.reports.send(Report::Closed(reason)).unwrap();
    }
}

fn outbound_only() -> RuntimeConfig {
    RuntimeConfig {
        shards: Some(1),
        ..RuntimeConfig::default()
    }
}

fn start_dialer(
    target: SocketAddr,
    local: Option<SocketAddr>,
) -> Option<(ring_runtime::RuntimeHandle<()>, mpsc::Receiver<Report>)> {
    let (tx, rx) = mpsc::channel();
    let handle = common::start(outbound_only(), move |_| Dialer {
        target,
        local,
        reports: tx.clone(),
    })?;
    handle
        .post(ring_runtime::ShardId::new(0), vec![()])
        .unwrap();
    Some((handle, rx))
}

#[test]
fn outbound_connect_with_local_bind_exchanges_data() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap();
    let local = Some("127.0.0.2:0".parse().unwrap());
    let Some((handle, rx)) = start_dialer(target, local) else {
        return;
    };
    let (mut peer, peer_addr) = listener.accept().unwrap();
    assert_eq!(
        peer_addr.ip().to_string(),
        "127.0.0.2",
        "local bind honoured"
    );
    let mut ping = [0u8; 4];
    peer.read_exact(&mut ping).unwrap();
    assert_eq!(&ping, b"ping");
    peer.write_all(b"pong").unwrap();
    let next = || rx.recv_timeout(common::HANG).unwrap();
    assert!(matches!(next(), Report::Connected(Ok(()))));
    assert!(matches!(next(), Report::Data(data) if data == b"pong"));
    assert!(matches!(next(), Report::Closed(CloseReason::Local)));
    let mut rest = Vec::new();
    peer.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "closed after the exchange");
    handle.shutdown();
    handle.join().unwrap();
}

#[test]
fn refused_connect_reports_the_error_and_no_close() {
    // A port just closed, on a loopback address no other test listens on: a listener of a
    // concurrent test may be given the same port number, but only on 127.0.0.1.
    let closed_port = {
        let listener = TcpListener::bind("127.0.0.77:0").unwrap();
        listener.local_addr().unwrap()
    };
    let Some((handle, rx)) = start_dialer(closed_port, None) else {
        return;
    };
    match rx.recv_timeout(common::HANG).unwrap() {
        Report::Connected(Err(error)) => {
            assert_eq!(error.kind(), std::io::ErrorKind::ConnectionRefused)
        }
        _ => panic!("expected a refused connect"),
    }
    handle.shutdown();
    handle.join().unwrap();
    assert!(
        rx.try_recv().is_err(),
        "no on_closed after a failed connect"
    );
}
