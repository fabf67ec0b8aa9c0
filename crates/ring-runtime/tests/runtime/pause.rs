//! Pausing and resuming reads on one connection (`ShardCtx::pause_reading`): a paused
//! connection gets no `on_data` and its socket is left unread (the peer's writes stall once the
//! kernel's buffers are full), others keep flowing, a resume hands over everything in order,
//! and a paused connection still closes.

use std::collections::HashMap;
use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ring_runtime::{CloseReason, ConnId, Handler, RuntimeHandle, ShardCtx, ShardId, TimerId};

use crate::common;

/// What the test asks the shard to do with a connection.
enum Cmd {
    Pause(ConnId),
    Hold(ConnId),
    Resume(ConnId),
    Close(ConnId),
    Abort(ConnId),
}

/// What the handler reports.
#[derive(Debug, PartialEq, Eq)]
enum Note {
    Accepted(ConnId),
    /// A command took effect (its turn ran).
    Done,
    Closed(ConnId, CloseReason),
}

/// Everything the handler received, per connection.
type Received = Arc<Mutex<HashMap<ConnId, Vec<u8>>>>;

/// Records what it receives; pauses, resumes and closes on command. In `self_pausing` mode it
/// pauses a connection on each `on_data` and resumes it from a timer shortly after.
struct Pauser {
    notes: mpsc::Sender<Note>,
    received: Received,
    /// `on_data` calls for a connection while it was paused (must stay 0).
    violations: Arc<AtomicUsize>,
    self_pausing: bool,
}

impl Handler for Pauser {
    type Message = Cmd;

    fn on_accept(&mut self, _ctx: &mut ShardCtx<Cmd>, conn: ConnId, _peer: SocketAddr) {
        self.notes.send(Note::Accepted(conn)).unwrap();
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<Cmd>, conn: ConnId, data: Bytes) {
        if ctx.is_reading_paused(conn) {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        let mut received = self.received.lock().unwrap();
        received.entry(conn).or_default().extend_from_slice(&data);
        if self.self_pausing {
            ctx.pause_reading(conn);
            ctx.arm_timer(Duration::from_millis(2), conn.to_u64());
        }
    }

    fn on_timer(&mut self, ctx: &mut ShardCtx<Cmd>, _timer: TimerId, key: u64) {
        ctx.resume_reading(ConnId::from_u64(key));
    }

    fn on_closed(&mut self, _ctx: &mut ShardCtx<Cmd>, conn: ConnId, reason: CloseReason) {
        self.notes.send(Note::Closed(conn, reason)).unwrap();
    }

    fn on_messages(&mut self, ctx: &mut ShardCtx<Cmd>, messages: Vec<Cmd>) {
        for command in messages {
            match command {
                Cmd::Pause(conn) => ctx.pause_reading(conn),
                Cmd::Hold(conn) => ctx.hold_reading(conn),
                Cmd::Resume(conn) => ctx.resume_reading(conn),
                Cmd::Close(conn) => ctx.close(conn),
                Cmd::Abort(conn) => ctx.abort(conn),
            }
            self.notes.send(Note::Done).unwrap();
        }
    }
}

/// A one-shard runtime with a [`Pauser`].
struct Fixture {
    handle: RuntimeHandle<Cmd>,
    notes: mpsc::Receiver<Note>,
    received: Received,
    violations: Arc<AtomicUsize>,
}

impl Fixture {
    fn start(self_pausing: bool) -> Option<Self> {
        let (tx, notes) = mpsc::channel();
        let received = Received::default();
        let violations = Arc::new(AtomicUsize::new(0));
        let (for_shard, count) = (Arc::clone(&received), Arc::clone(&violations));
        let handle = common::start(common::config(1), move |_| Pauser {
            notes: tx.clone(),
            received: Arc::clone(&for_shard),
            violations: Arc::clone(&count),
            self_pausing,
        })?;
        Some(Self {
            handle,
            notes,
            received,
            violations,
        })
    }

    fn next(&self) -> Note {
        self.notes.recv_timeout(common::HANG).expect("a note")
    }

    /// A client and its connection's id.
    fn connect(&self) -> (TcpStream, ConnId) {
        let stream = common::client(self.handle.local_addrs()[0]);
        match self.next() {
            Note::Accepted(conn) => (stream, conn),
            other => panic!("expected an accept, got {other:?}"),
        }
    }

    /// Runs `command` on the shard and waits until its turn ran.
    fn command(&self, command: Cmd) {
        let shard = ShardId::new(0);
        assert!(self.handle.post(shard, vec![command]).is_ok(), "post");
        assert_eq!(self.next(), Note::Done);
    }

    fn received(&self, conn: ConnId) -> usize {
        let received = self.received.lock().unwrap();
        received.get(&conn).map_or(0, Vec::len)
    }

    fn received_bytes(&self, conn: ConnId) -> Vec<u8> {
        let received = self.received.lock().unwrap();
        received.get(&conn).cloned().unwrap_or_default()
    }
}

/// Writes `data` without blocking until the kernel takes no more for a while; returns how
/// much it took.
fn write_until_stalled(stream: &mut TcpStream, data: &[u8]) -> usize {
    stream.set_nonblocking(true).unwrap();
    let mut written = 0;
    let mut stalled_since = None::<Instant>;
    while written < data.len() {
        let end = (written + 65_536).min(data.len());
        match stream.write(&data[written..end]) {
            Ok(n) => {
                written += n;
                stalled_since = None;
            }
            Err(error) if error.kind() == ErrorKind::WouldBlock => {
                let since = *stalled_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_millis(300) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(error) => panic!("write: {error}"),
        }
    }
    stream.set_nonblocking(false).unwrap();
    written
}

/// Far more than loopback's socket buffers hold, so a paused reader stalls the writer.
const FLOOD: usize = 48 << 20;

#[test]
fn a_paused_connection_stalls_its_peer_and_gets_everything_in_order_after_the_resume() {
    let Some(fixture) = Fixture::start(false) else {
        return;
    };
    let (mut paused, paused_id) = fixture.connect();
    let (mut other, other_id) = fixture.connect();
    fixture.command(Cmd::Pause(paused_id));
    let data = common::pattern(7, FLOOD);
    let taken = write_until_stalled(&mut paused, &data);
    assert!(
        taken < FLOOD,
        "the kernel took all {FLOOD} bytes: the paused socket is being read"
    );
    let other_data = common::pattern(8, 256 << 10);
    common::write_all(&mut other, &other_data);
    common::wait_until("the other connection's bytes", || {
        fixture.received(other_id) == other_data.len()
    });
    assert_eq!(fixture.received_bytes(other_id), other_data);
    assert_eq!(fixture.received(paused_id), 0, "no on_data while paused");
    fixture.command(Cmd::Resume(paused_id));
    common::write_all(&mut paused, &data[taken..]);
    common::wait_until("the paused connection's bytes", || {
        fixture.received(paused_id) == FLOOD
    });
    assert!(fixture.received_bytes(paused_id) == data, "in order");
    assert_eq!(fixture.violations.load(Ordering::Relaxed), 0);
}

/// `hold_reading` keeps the receive armed only until data comes: then the connection is
/// paused as by `pause_reading` (its peer stalls), and a resume hands everything over in order.
#[test]
fn a_held_connection_stops_reading_once_data_comes_and_gets_everything_after_the_resume() {
    let Some(fixture) = Fixture::start(false) else {
        return;
    };
    let (mut held, held_id) = fixture.connect();
    fixture.command(Cmd::Hold(held_id));
    let data = common::pattern(9, FLOOD);
    let taken = write_until_stalled(&mut held, &data);
    assert!(
        taken < FLOOD,
        "the kernel took all {FLOOD} bytes: the held socket is still being read"
    );
    assert_eq!(fixture.received(held_id), 0, "no on_data while held");
    fixture.command(Cmd::Resume(held_id));
    common::write_all(&mut held, &data[taken..]);
    common::wait_until("the held connection's bytes", || {
        fixture.received(held_id) == FLOOD
    });
    assert!(fixture.received_bytes(held_id) == data, "in order");
    assert_eq!(fixture.violations.load(Ordering::Relaxed), 0);
}

#[test]
fn pausing_from_on_data_holds_what_was_already_received() {
    let Some(fixture) = Fixture::start(true) else {
        return;
    };
    let (mut stream, conn) = fixture.connect();
    let data = common::pattern(9, 4 << 20);
    let writer = std::thread::spawn(move || {
        common::write_all(&mut stream, &data);
        (stream, data)
    });
    let (_stream, data) = writer.join().unwrap();
    common::wait_until("every byte", || fixture.received(conn) == data.len());
    assert!(fixture.received_bytes(conn) == data, "in order");
    assert_eq!(
        fixture.violations.load(Ordering::Relaxed),
        0,
        "on_data while paused"
    );
}

#[test]
fn a_paused_connection_still_closes_and_aborts() {
    let Some(fixture) = Fixture::start(false) else {
        return;
    };
    let (mut graceful, graceful_id) = fixture.connect();
    let (mut aborted, aborted_id) = fixture.connect();
    fixture.command(Cmd::Pause(graceful_id));
    fixture.command(Cmd::Pause(aborted_id));
    let data = common::pattern(10, 4 << 20);
    write_until_stalled(&mut graceful, &data);
    write_until_stalled(&mut aborted, &data);
    fixture.command(Cmd::Close(graceful_id));
    assert!(matches!(fixture.next(), Note::Closed(id, CloseReason::Local) if id == graceful_id));
    fixture.command(Cmd::Abort(aborted_id));
    assert!(matches!(fixture.next(), Note::Closed(id, CloseReason::Local) if id == aborted_id));
    assert_eq!(fixture.received(graceful_id), 0);
    assert_eq!(fixture.received(aborted_id), 0);
    assert_eq!(fixture.violations.load(Ordering::Relaxed), 0);
    // Both peers see the end (unread input turns even the graceful close into a reset).
    for stream in [&mut graceful, &mut aborted] {
        let mut buf = [0u8; 16];
        let ended = match std::io::Read::read(stream, &mut buf) {
            Ok(n) => n == 0,
            Err(error) => error.kind() == ErrorKind::ConnectionReset,
        };
        assert!(ended, "the peer sees the close");
    }
    let (mut fresh, fresh_id) = fixture.connect();
    common::write_all(&mut fresh, b"still serving");
    common::wait_until("a new connection's bytes", || {
        fixture.received(fresh_id) == 13
    });
}
