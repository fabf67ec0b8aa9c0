//! Holding a connection's writes (`ShardCtx::hold_writing`): frames queued while held, and
//! those queued after them, leave only at `release_writing`, in order; other connections keep
//! writing; a held connection that closes still writes what it has.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{ConnId, Handler, RuntimeHandle, ShardCtx, ShardId};

use crate::common;

enum Cmd {
    /// Queue these bytes, then hold the connection's writes.
    SendHeld(ConnId, &'static [u8]),
    Send(ConnId, &'static [u8]),
    Release(ConnId),
    Close(ConnId),
}

#[derive(Debug, PartialEq, Eq)]
enum Note {
    Accepted(ConnId),
    Done,
}

struct Holder {
    notes: mpsc::Sender<Note>,
}

impl Handler for Holder {
    type Message = Cmd;

    fn on_accept(&mut self, _ctx: &mut ShardCtx<Cmd>, conn: ConnId, _peer: SocketAddr) {
        self.notes.send(Note::Accepted(conn)).unwrap();
    }

    fn on_data(&mut self, _ctx: &mut ShardCtx<Cmd>, _conn: ConnId, _data: Bytes) {}

    fn on_messages(&mut self, ctx: &mut ShardCtx<Cmd>, messages: Vec<Cmd>) {
        for command in messages {
            match command {
                Cmd::SendHeld(conn, bytes) => {
                    ctx.send(conn, Bytes::from_static(bytes)).unwrap();
                    ctx.hold_writing(conn);
                }
                Cmd::Send(conn, bytes) => ctx.send(conn, Bytes::from_static(bytes)).unwrap(),
                Cmd::Release(conn) => ctx.release_writing(conn),
                Cmd::Close(conn) => ctx.close(conn),
            }
            self.notes.send(Note::Done).unwrap();
        }
    }
}

struct Fixture {
    handle: RuntimeHandle<Cmd>,
    notes: mpsc::Receiver<Note>,
}

impl Fixture {
    fn start() -> Option<Self> {
        let (tx, notes) = mpsc::channel();
        let handle = common::start(common::config(1), move |_| Holder { notes: tx.clone() })?;
        Some(Self { handle, notes })
    }

    fn connect(&self) -> (TcpStream, ConnId) {
        let stream = common::client(self.handle.local_addrs()[0]);
        match self.notes.recv_timeout(common::HANG).expect("a note") {
            Note::Accepted(conn) => (stream, conn),
            other => panic!("expected an accept, got {other:?}"),
        }
    }

    /// Runs `command` on the shard and waits until its turn ran.
    fn command(&self, command: Cmd) {
        assert!(self.handle.post(ShardId::new(0), vec![command]).is_ok());
        let note = self.notes.recv_timeout(common::HANG).expect("a note");
        assert_eq!(note, Note::Done);
    }
}

/// Whatever `stream` has to read within a short wait (nothing: empty).
fn available(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut buf = [0u8; 64];
    let read = match stream.read(&mut buf) {
        Ok(n) => buf[..n].to_vec(),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Vec::new(),
        Err(e) => panic!("read: {e}"),
    };
    stream.set_read_timeout(Some(common::HANG)).unwrap();
    read
}

#[test]
fn held_frames_leave_in_order_once_released_and_others_are_not_held() {
    let Some(fixture) = Fixture::start() else {
        return;
    };
    let (mut held, held_id) = fixture.connect();
    let (mut other, other_id) = fixture.connect();
    fixture.command(Cmd::SendHeld(held_id, b"one,"));
    fixture.command(Cmd::Send(held_id, b"two,"));
    fixture.command(Cmd::Send(other_id, b"free"));
    assert_eq!(common::read_exact(&mut other, 4), b"free");
    assert!(available(&mut held).is_empty(), "nothing leaves while held");
    fixture.command(Cmd::Release(held_id));
    assert_eq!(common::read_exact(&mut held, 8), b"one,two,");
    fixture.command(Cmd::Send(held_id, b"three"));
    assert_eq!(
        common::read_exact(&mut held, 5),
        b"three",
        "released for good"
    );
}

#[test]
fn a_held_connection_that_closes_writes_what_it_has() {
    let Some(fixture) = Fixture::start() else {
        return;
    };
    let (mut held, held_id) = fixture.connect();
    fixture.command(Cmd::SendHeld(held_id, b"last words"));
    fixture.command(Cmd::Close(held_id));
    assert_eq!(common::read_to_end(&mut held), b"last words");
}
