//! [`ClientConn`]: one outbound QUIC connection of a [`super::QuicClientDriver`] and the MQTT
//! stream it carries. Once the handshake completes the client opens its first bidirectional
//! stream (the MQTT connection, as the broker's `QuicConn` expects) and reports the virtual
//! connection connected; the stream's bytes then pass both ways under the same rules as the
//! server's `QuicConn`: what the stream's flow control does not take yet waits here (and is
//! reported with `set_unsent`), bytes are read only while the handler reads.
//!
//! One difference in closing: a graceful close finishes the stream and closes the connection
//! once the server has acknowledged every byte of it (the last MQTT packet, DISCONNECT, is not
//! lost to the CONNECTION_CLOSE); the runtime's drain timeout bounds the wait.

use std::io::ErrorKind;
use std::time::Instant;

use bytes::Bytes;
use quinn_proto::{Connection, ConnectionError, Dir, Event, StreamEvent, StreamId, VarInt};
use ring_runtime::{CloseReason, ConnId, DriverClose, DriverIo};

use super::stream::{Unsent, read_stream};

/// Application error code of a close the client starts (no error).
const CLOSED_BY_CLIENT: u32 = 0;

/// What [`ClientConn::step`] changed in the driver's tables.
#[derive(Default)]
pub(super) struct Stepped {
    /// The virtual connection was reported closed (or its connect failed): its id is the
    /// runtime's again.
    pub(super) released: Option<ConnId>,
    /// The QUIC connection is drained: forget it.
    pub(super) drained: bool,
}

/// How the connection is ending, as far as the handler is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// Open (or connecting).
    No,
    /// The handler closed gracefully: finish the stream, close once it is acknowledged.
    Graceful,
    /// The handler aborted: the runtime already forgot the virtual connection.
    Aborted,
    /// The server or the network ended it.
    Lost,
}

/// One outbound QUIC connection.
pub(super) struct ClientConn {
    pub(super) quic: Connection,
    pub(super) deadline: Option<Instant>,
    /// The handler paused reading: the stream's bytes wait in QUIC (its window pushes back).
    pub(super) paused: bool,
    /// The virtual connection, until it is reported closed (or its connect failed).
    conn: Option<ConnId>,
    released: Option<ConnId>,
    /// The MQTT stream, opened when the handshake completes.
    stream: Option<StreamId>,
    /// Bytes the handler queued that the stream has not taken yet (flow control).
    unsent: Unsent,
    finish_requested: bool,
    finished_sent: bool,
    peer_finished: bool,
    ending: Ending,
}

impl ClientConn {
    /// The connection `quic` (its handshake started) for the virtual connection `conn`.
    pub(super) fn new(quic: Connection, conn: ConnId) -> Self {
        Self {
            quic,
            deadline: None,
            paused: false,
            conn: Some(conn),
            released: None,
            stream: None,
            unsent: Unsent::default(),
            finish_requested: false,
            finished_sent: false,
            peer_finished: false,
            ending: Ending::No,
        }
    }

    /// Reports the virtual connection closed (once), for `reason`; before the stream opened
    /// the runtime makes that a failed connect.
    fn release(&mut self, io: &mut DriverIo<'_>, reason: CloseReason) {
        if let Some(conn) = self.conn.take() {
            io.closed(conn, reason);
            self.released = Some(conn);
        }
    }

    /// Handles what the connection has to say now: events, the stream's bytes in and out.
    pub(super) fn step(&mut self, io: &mut DriverIo<'_>) -> Stepped {
        let mut stepped = Stepped::default();
        while let Some(event) = self.quic.poll() {
            match event {
                Event::Connected | Event::Stream(StreamEvent::Available { dir: Dir::Bi }) => {
                    self.open_stream(io)
                }
                Event::Stream(StreamEvent::Finished { id } | StreamEvent::Stopped { id, .. })
                    if Some(id) == self.stream =>
                {
                    self.acknowledged(io)
                }
                Event::ConnectionLost { reason } => self.lost(io, &reason),
                _ => {}
            }
        }
        self.read(io);
        self.write(io);
        if self.quic.is_drained() {
            self.release(io, CloseReason::Local);
            stepped.drained = true;
        }
        stepped.released = self.released.take();
        stepped
    }

    /// After the handshake: opens the MQTT stream and reports the connect (once; a stream
    /// not yet allowed is opened when the server allows it).
    fn open_stream(&mut self, io: &mut DriverIo<'_>) {
        if self.stream.is_some() || self.ending != Ending::No || self.quic.is_handshaking() {
            return;
        }
        let Some(stream) = self.quic.streams().open(Dir::Bi) else {
            return;
        };
        self.stream = Some(stream);
        if let Some(conn) = self.conn {
            io.connected(conn, Ok(()));
        }
    }

    /// The server acknowledged the whole stream (or stopped reading it): a graceful close
    /// completes.
    fn acknowledged(&mut self, io: &mut DriverIo<'_>) {
        if self.ending == Ending::Graceful && !self.quic.is_closed() {
            self.close_now(io.now());
            self.release(io, CloseReason::Local);
        }
    }

    fn lost(&mut self, io: &mut DriverIo<'_>, reason: &ConnectionError) {
        if matches!(self.ending, Ending::Aborted | Ending::Lost) {
            return;
        }
        self.ending = Ending::Lost;
        self.unsent.clear();
        let reason = close_reason(reason, self.stream.is_some());
        self.release(io, reason);
    }

    /// Hands the stream's bytes to the handler, unless it paused reading.
    fn read(&mut self, io: &mut DriverIo<'_>) {
        let (Some(stream), Some(conn)) = (self.stream, self.conn) else {
            return;
        };
        if self.paused || self.peer_finished || self.ending == Ending::Lost {
            return;
        }
        let finished = read_stream(&mut self.quic, stream, |chunk| {
            io.deliver(conn, chunk);
            true
        });
        if finished {
            self.peer_finished = true;
            io.finished(conn);
        }
    }

    /// The handler's frames for the stream, in order.
    pub(super) fn queue(&mut self, io: &mut DriverIo<'_>, conn: ConnId, frames: &[Bytes]) {
        if self.ending != Ending::No {
            return;
        }
        self.unsent.push(frames);
        self.write(io);
        io.set_unsent(conn, self.unsent.bytes());
    }

    /// Writes what the stream takes now; finishes it once everything is written and the
    /// handler shut its writing down or closes.
    fn write(&mut self, io: &mut DriverIo<'_>) {
        let Some(stream) = self.stream else {
            return;
        };
        let all_written = self.unsent.write_to(&mut self.quic, stream);
        if let Some(conn) = self.conn {
            io.set_unsent(conn, self.unsent.bytes());
        }
        let ending = self.finish_requested || self.ending == Ending::Graceful;
        if all_written && ending && !self.finished_sent {
            self.finished_sent = self.quic.send_stream(stream).finish().is_ok();
        }
    }

    /// The handler ended its side of the stream (after what it queued).
    pub(super) fn finish_when_sent(&mut self) {
        self.finish_requested = true;
    }

    /// The handler closes the connection (an abort also while it is still connecting).
    pub(super) fn close(&mut self, io: &mut DriverIo<'_>, how: DriverClose) {
        match how {
            DriverClose::Graceful if self.ending == Ending::No => {
                self.ending = Ending::Graceful;
                if self.stream.is_none() {
                    self.close_now(io.now());
                    return self.release(io, CloseReason::Local);
                }
                self.write(io);
            }
            DriverClose::Abort => {
                // The runtime has forgotten the virtual connection: no report.
                self.ending = Ending::Aborted;
                self.conn = None;
                self.unsent.clear();
                self.close_now(io.now());
            }
            DriverClose::Graceful => {}
        }
    }

    fn close_now(&mut self, now: Instant) {
        if !self.quic.is_closed() {
            let code = VarInt::from_u32(CLOSED_BY_CLIENT);
            self.quic.close(now, code, Bytes::new());
        }
    }
}

/// How a lost connection ends its virtual connection (before the stream opened, `connected`
/// false: the error kind of the failed connect).
fn close_reason(reason: &ConnectionError, connected: bool) -> CloseReason {
    let kind = match reason {
        ConnectionError::ApplicationClosed(_) => return CloseReason::PeerClosed,
        ConnectionError::ConnectionClosed(_) if connected => return CloseReason::PeerClosed,
        ConnectionError::LocallyClosed => return CloseReason::Local,
        ConnectionError::TimedOut => ErrorKind::TimedOut,
        // The server refused the handshake (no common ALPN, say).
        ConnectionError::ConnectionClosed(_) => ErrorKind::ConnectionRefused,
        // This side's own transport error: the server's certificate was refused, say.
        ConnectionError::TransportError(_) => ErrorKind::InvalidData,
        _ => ErrorKind::ConnectionReset,
    };
    CloseReason::Error { kind }
}

impl super::links::QuicLink for ClientConn {
    fn quic(&mut self) -> &mut Connection {
        &mut self.quic
    }

    fn scheduled(&mut self) -> &mut Option<Instant> {
        &mut self.deadline
    }
}
