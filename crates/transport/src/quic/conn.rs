//! [`QuicConn`]: one QUIC connection and the MQTT stream it carries. The first bidirectional
//! stream the client opens is the MQTT connection (as in EMQX's MQTT over QUIC); its virtual
//! connection opens then, and closes when the stream or the connection ends.

use std::time::Instant;

use bytes::Bytes;
use quinn_proto::{Connection, ConnectionError, Dir, Event, StreamEvent, StreamId, VarInt};
use ring_runtime::{CloseReason, ConnId, DriverClose, DriverIo, PeerIdentity};
use rustls_pki_types::CertificateDer;

use super::early::EarlyGate;
use super::stream::{Unsent, read_stream};

/// Application error code of a close the broker starts (no error).
const CLOSED_BY_BROKER: u32 = 0;

/// What [`QuicConn::step`] changed in the driver's tables.
#[derive(Default)]
pub(super) struct Stepped {
    /// The MQTT stream opened: the virtual connection is this one.
    pub(super) opened: Option<ConnId>,
    /// The virtual connection was reported closed: its id is the runtime's again.
    pub(super) released: Option<ConnId>,
    /// The QUIC connection is drained: forget it.
    pub(super) drained: bool,
    /// The peer's address changed (told to the runtime: `ShardCtx::peer_addr` follows).
    pub(super) migrated: bool,
    /// The MQTT stream opened in 0-RTT, before the handshake completed.
    pub(super) opened_early: bool,
    /// The handshake completed after some of the early data had to wait for it.
    pub(super) early_waited: bool,
}

/// How the connection is ending, as far as the handler is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// Open.
    No,
    /// The handler closed gracefully: close once the queued bytes are sent, then report.
    Graceful,
    /// The handler aborted: the runtime already forgot the virtual connection.
    Aborted,
    /// The peer or the network ended it.
    Lost,
}

/// One QUIC connection.
pub(super) struct QuicConn {
    pub(super) quic: Connection,
    pub(super) deadline: Option<Instant>,
    /// The handler paused reading: the stream's bytes wait in QUIC (its window pushes back).
    pub(super) paused: bool,
    /// The virtual connection, from the stream's opening until it is reported closed.
    conn: Option<ConnId>,
    released: Option<ConnId>,
    /// The peer's address as last told to the runtime.
    peer: std::net::SocketAddr,
    /// The listener's `identity_as_username`: the client certificate's name is handed over.
    identity_as_username: bool,
    stream: Option<StreamId>,
    /// While the handshake of a connection whose stream opened in 0-RTT runs: what of the
    /// early data goes to the broker now (`early.rs`).
    early: Option<EarlyGate>,
    /// Bytes the handler queued that the stream has not taken yet (flow control).
    unsent: Unsent,
    finish_requested: bool,
    finished_sent: bool,
    peer_finished: bool,
    ending: Ending,
}

impl QuicConn {
    pub(super) fn new(quic: Connection, identity_as_username: bool) -> Self {
        Self {
            peer: quic.remote_address(),
            identity_as_username,
            quic,
            deadline: None,
            paused: false,
            conn: None,
            released: None,
            stream: None,
            early: None,
            unsent: Unsent::default(),
            finish_requested: false,
            finished_sent: false,
            peer_finished: false,
            ending: Ending::No,
        }
    }

    /// Reports the virtual connection closed (once), for `reason`.
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
                Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) if self.stream.is_none() => {
                    stepped.opened = self.open_stream(io);
                    stepped.opened_early = self.early.is_some();
                }
                Event::Connected => stepped.early_waited = self.handshake_done(io),
                Event::ConnectionLost { reason } => self.lost(io, &reason),
                _ => {}
            }
        }
        stepped.migrated = self.follow_peer(io);
        self.read(io);
        self.write(io);
        if self.quic.is_drained() {
            self.release(io, CloseReason::Local);
            stepped.drained = true;
        }
        stepped.released = self.released.take();
        stepped
    }

    /// Whether the peer's address changed (quinn-proto moved to the new path): the runtime
    /// is told, so the broker's view of the client's address follows.
    fn follow_peer(&mut self, io: &mut DriverIo<'_>) -> bool {
        let now = self.quic.remote_address();
        if now == self.peer {
            return false;
        }
        self.peer = now;
        if let Some(conn) = self.conn {
            io.set_peer(conn, now);
        }
        true
    }

    fn open_stream(&mut self, io: &mut DriverIo<'_>) -> Option<ConnId> {
        let stream = self.quic.streams().accept(Dir::Bi)?;
        self.stream = Some(stream);
        if self.quic.is_handshaking() {
            self.early = Some(EarlyGate::default());
        }
        let Some(conn) = io.open(self.quic.remote_address()) else {
            self.close_now(io.now());
            return None;
        };
        if self.identity_as_username {
            io.set_identity(conn, self.certificate_name());
        }
        self.conn = Some(conn);
        Some(conn)
    }

    /// The handshake completed: what the early data held goes to the broker, in order.
    /// Returns whether anything had to wait.
    fn handshake_done(&mut self, io: &mut DriverIo<'_>) -> bool {
        let Some(gate) = self.early.take() else {
            return false;
        };
        let waited = gate.is_shut();
        let (held, finished) = gate.open();
        let Some(conn) = self.conn else {
            return waited;
        };
        if !held.is_empty() {
            io.deliver(conn, held);
        }
        if finished {
            self.peer_finished = true;
            io.finished(conn);
        }
        waited
    }

    /// The verified client certificate's Common Name, for `identity_as_username`.
    fn certificate_name(&self) -> PeerIdentity {
        let certs = (self.quic.crypto_session().peer_identity())
            .and_then(|any| any.downcast::<Vec<CertificateDer<'static>>>().ok());
        let name = certs.and_then(|certs| certs.first().and_then(crate::tls::common_name));
        name.map_or(PeerIdentity::Unnamed, |name| {
            PeerIdentity::Named(name.into())
        })
    }

    fn lost(&mut self, io: &mut DriverIo<'_>, reason: &ConnectionError) {
        if self.ending != Ending::No {
            return;
        }
        let reason = match reason {
            ConnectionError::ApplicationClosed(_) | ConnectionError::ConnectionClosed(_) => {
                CloseReason::PeerClosed
            }
            ConnectionError::TimedOut => CloseReason::Error {
                kind: std::io::ErrorKind::TimedOut,
            },
            _ => CloseReason::Error {
                kind: std::io::ErrorKind::ConnectionReset,
            },
        };
        self.ending = Ending::Lost;
        self.unsent.clear();
        self.release(io, reason);
    }

    /// Hands the stream's bytes to the handler, unless it paused reading.
    fn read(&mut self, io: &mut DriverIo<'_>) {
        let (Some(stream), Some(conn)) = (self.stream, self.conn) else {
            return;
        };
        if self.paused || self.peer_finished || self.ending != Ending::No {
            return;
        }
        if self.early.as_ref().is_some_and(EarlyGate::is_shut) {
            return;
        }
        let early = &mut self.early;
        let finished = read_stream(&mut self.quic, stream, |chunk| match early {
            None => {
                io.deliver(conn, chunk);
                true
            }
            Some(gate) => {
                if let Some(safe) = gate.admit(&chunk) {
                    io.deliver(conn, safe);
                }
                !gate.is_shut()
            }
        });
        match (finished, &mut self.early) {
            (false, _) => {}
            (true, Some(gate)) => gate.finish(),
            (true, None) => {
                self.peer_finished = true;
                io.finished(conn);
            }
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

    /// Writes what the stream takes now; finishes or closes once everything is written.
    fn write(&mut self, io: &mut DriverIo<'_>) {
        let Some(stream) = self.stream else {
            return;
        };
        let all_written = self.unsent.write_to(&mut self.quic, stream);
        if let Some(conn) = self.conn {
            io.set_unsent(conn, self.unsent.bytes());
        }
        if !all_written {
            return;
        }
        if self.finish_requested && !self.finished_sent {
            self.finished_sent = self.quic.send_stream(stream).finish().is_ok();
        }
        if self.ending == Ending::Graceful && !self.quic.is_closed() {
            self.close_now(io.now());
            self.release(io, CloseReason::Local);
        }
    }

    /// The handler ended its side of the stream (after what it queued).
    pub(super) fn finish_when_sent(&mut self) {
        self.finish_requested = true;
    }

    /// The handler closes the connection.
    pub(super) fn close(&mut self, io: &mut DriverIo<'_>, how: DriverClose) {
        match how {
            DriverClose::Graceful if self.ending == Ending::No => {
                self.ending = Ending::Graceful;
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
        let code = VarInt::from_u32(CLOSED_BY_BROKER);
        self.quic.close(now, code, Bytes::new());
    }
}

impl super::links::QuicLink for QuicConn {
    fn quic(&mut self) -> &mut Connection {
        &mut self.quic
    }

    fn scheduled(&mut self) -> &mut Option<Instant> {
        &mut self.deadline
    }
}
