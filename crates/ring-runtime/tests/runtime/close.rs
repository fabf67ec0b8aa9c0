//! Peer reset, half-close in both directions.

use std::net::{Shutdown, SocketAddr};
use std::sync::mpsc;

use bytes::Bytes;
use ring_runtime::{CloseReason, ConnId, Handler, ShardCtx};

use crate::common;

/// Reports lifecycle events; echoes data; on "bye" replies and shuts its write side.
struct Recorder {
    events: mpsc::Sender<String>,
}

impl Handler for Recorder {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {
        self.events.send("accept".into()).unwrap();
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        if &data[..] == b"bye" {
            ctx.send(conn, Bytes::from_static(b"see you")).unwrap();
            ctx.shutdown_write(conn);
            assert!(ctx.send(conn, Bytes::from_static(b"late")).is_err());
        } else {
            self.events
                .send(format!("data {}", String::from_utf8_lossy(&data)))
                .unwrap();
            if ctx.is_open(conn) && ctx.send(conn, data).is_err() {
                self.events.send("send refused".into()).unwrap();
            }
        }
    }

    fn on_read_closed(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId) {
        self.events.send("fin".into()).unwrap();
        ctx.close(conn);
    }

    fn on_closed(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, reason: CloseReason) {
        self.events.send(format!("closed {reason:?}")).unwrap();
    }
}

fn start() -> Option<(ring_runtime::RuntimeHandle<()>, mpsc::Receiver<String>)> {
    let (tx, rx) = mpsc::channel();
    let handle = common::start(common::config(1), move |_| Recorder { events: tx.clone() })?;
    Some((handle, rx))
}

fn next(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(common::HANG).expect("event")
}

#[test]
fn peer_reset_reports_connection_reset() {
    let Some((handle, rx)) = start() else {
        return;
    };
    let stream = common::client(handle.local_addrs()[0]);
    assert_eq!(next(&rx), "accept");
    socket2::SockRef::from(&stream)
        .set_linger(Some(std::time::Duration::ZERO))
        .unwrap();
    drop(stream);
    let closed = next(&rx);
    assert_eq!(
        closed,
        format!(
            "closed {:?}",
            CloseReason::Error {
                kind: std::io::ErrorKind::ConnectionReset
            }
        )
    );
}

#[test]
fn client_half_close_still_gets_the_reply() {
    let Some((handle, rx)) = start() else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    assert_eq!(next(&rx), "accept");
    common::write_all(&mut stream, b"hello");
    stream.shutdown(Shutdown::Write).unwrap();
    assert_eq!(common::read_to_end(&mut stream), b"hello");
    assert_eq!(next(&rx), "data hello");
    assert_eq!(next(&rx), "fin");
    assert_eq!(next(&rx), format!("closed {:?}", CloseReason::PeerClosed));
}

#[test]
fn server_shutdown_write_keeps_reading() {
    let Some((handle, rx)) = start() else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    assert_eq!(next(&rx), "accept");
    common::write_all(&mut stream, b"bye");
    assert_eq!(
        common::read_to_end(&mut stream),
        b"see you",
        "reply, then FIN"
    );
    common::write_all(&mut stream, b"still here");
    assert_eq!(next(&rx), "data still here");
    assert_eq!(next(&rx), "send refused", "write side is shut");
    drop(stream);
    assert_eq!(next(&rx), "fin");
    assert_eq!(next(&rx), format!("closed {:?}", CloseReason::PeerClosed));
}
