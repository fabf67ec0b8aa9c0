//! One connection's TLS session on rustls' unbuffered API: the connection keeps only what it
//! must (keys and handshake state); a partial record is held until the rest arrives and the
//! buffer is freed once it is consumed, so an idle TLS connection holds no buffer at all (the
//! buffered `ServerConnection` keeps a 4 KiB read buffer per connection).

use bytes::BytesMut;
use ring_runtime::{LayerError, LayerState};
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncryptError, InsufficientSizeError, UnbufferedStatus,
    WriteTraffic,
};
use rustls_pki_types::CertificateDer;

use crate::error::CertificateRefusal;
use crate::stack::{TlsHalf, tls_error};

/// Room for a record's header, padding and tag beyond its plaintext.
const RECORD_OVERHEAD: usize = 64;
/// The largest plaintext of one TLS record.
const MAX_FRAGMENT: usize = 16 * 1024;

/// A server-side TLS session.
pub struct TlsSession {
    conn: UnbufferedServerConnection,
    /// Received bytes not yet consumed (a partial record): empty and unallocated when idle.
    incoming: Vec<u8>,
    /// The session failed: nothing more is read or written.
    failed: bool,
    /// Why the client's certificate was refused, when the cause has a name.
    refusal: Option<CertificateRefusal>,
}

/// What one pass over the received records ended with.
enum Pass {
    /// Nothing more until the peer sends more.
    Wait,
    /// Application data may be written now.
    Writable,
}

impl TlsSession {
    pub(crate) fn new(conn: UnbufferedServerConnection) -> Self {
        Self {
            conn,
            incoming: Vec::new(),
            failed: false,
            refusal: None,
        }
    }

    /// The client's certificate chain, once the handshake verified one.
    pub(crate) fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.conn.peer_certificates()
    }

    /// Why the handshake refused the client's certificate, when the cause has a name.
    pub(crate) fn certificate_refusal(&self) -> Option<CertificateRefusal> {
        self.refusal
    }

    /// After an error: the alert rustls queued goes to `wire` (one more pass yields it), and
    /// the session is never driven again (rustls must not see the bad input twice).
    fn fail(&mut self, wire: &mut BytesMut) {
        self.failed = true;
        self.incoming = Vec::new();
        let UnbufferedStatus { state, .. } = self.conn.process_tls_records(&mut []);
        if let Ok(ConnectionState::EncodeTlsData(mut encode)) = state {
            let _ = grow_until_fits(wire, 64, |buf| encode.encode(buf));
        }
    }

    /// Runs the records received so far; the plaintext of application records goes to
    /// `plain`, handshake records are encoded into `wire`.
    fn process(
        &mut self,
        plain: &mut BytesMut,
        wire: &mut BytesMut,
        closed: &mut bool,
    ) -> Result<Pass, LayerError> {
        loop {
            let UnbufferedStatus { mut discard, state } =
                self.conn.process_tls_records(&mut self.incoming);
            let state = match state {
                Ok(state) => state,
                Err(error) => {
                    self.refusal = CertificateRefusal::of(&error);
                    return Err(tls_error(error));
                }
            };
            let pass = match state {
                ConnectionState::ReadTraffic(mut traffic) => {
                    while let Some(record) = traffic.next_record() {
                        let record = record.map_err(tls_error)?;
                        discard += record.discard;
                        plain.extend_from_slice(record.payload);
                    }
                    None
                }
                ConnectionState::ReadEarlyData(mut early) => {
                    while let Some(record) = early.next_record() {
                        let record = record.map_err(tls_error)?;
                        discard += record.discard;
                        plain.extend_from_slice(record.payload);
                    }
                    None
                }
                ConnectionState::EncodeTlsData(mut encode) => {
                    grow_until_fits(wire, 1024, |buf| match encode.encode(buf) {
                        Err(EncodeError::AlreadyEncoded) => Ok(0),
                        other => other,
                    })?;
                    None
                }
                ConnectionState::TransmitTlsData(transmit) => {
                    // The encoded records are in `wire`: the shard sends them this turn.
                    transmit.done();
                    None
                }
                ConnectionState::PeerClosed => {
                    *closed = true;
                    None
                }
                ConnectionState::Closed => {
                    *closed = true;
                    Some(Pass::Wait)
                }
                ConnectionState::BlockedHandshake => Some(Pass::Wait),
                ConnectionState::WriteTraffic(_) => Some(Pass::Writable),
                _ => return Err(LayerError::new("TLS: unexpected connection state")),
            };
            self.incoming.drain(..discard);
            if let Some(pass) = pass {
                return Ok(pass);
            }
        }
    }

    /// Runs `write` once the session may send application data.
    fn with_write_traffic(
        &mut self,
        wire: &mut BytesMut,
        write: impl FnOnce(
            &mut WriteTraffic<'_, rustls::server::ServerConnectionData>,
            &mut BytesMut,
        ) -> Result<(), LayerError>,
    ) -> Result<(), LayerError> {
        // Everything received was processed by `receive`; what is left is at most a partial
        // record, and pending handshake output is encoded here first.
        let mut plain = BytesMut::new();
        let mut closed = false;
        if let Pass::Wait = self.process(&mut plain, wire, &mut closed)? {
            return Err(LayerError::new(
                "TLS: data to send before the handshake finished",
            ));
        }
        if !plain.is_empty() {
            return Err(LayerError::new("TLS: records left unread before a send"));
        }
        let UnbufferedStatus { state, .. } = self.conn.process_tls_records(&mut self.incoming);
        match state.map_err(tls_error)? {
            ConnectionState::WriteTraffic(mut traffic) => write(&mut traffic, wire),
            _ => Err(LayerError::new("TLS: not ready to send")),
        }
    }

    /// Frees the receive buffer when it holds nothing, and shrinks it after a large record.
    fn release_incoming(&mut self) {
        if self.incoming.is_empty() {
            self.incoming = Vec::new();
        } else if self.incoming.capacity() > 2 * (MAX_FRAGMENT + RECORD_OVERHEAD) {
            self.incoming.shrink_to_fit();
        }
    }
}

impl TlsHalf for TlsSession {
    /// Decrypts what arrived: plaintext to `plain`, handshake messages to `wire`.
    fn receive(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        wire: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        if self.failed {
            return Err(LayerError::new("TLS: the session already failed"));
        }
        self.incoming.extend_from_slice(input);
        let mut closed = false;
        let result = self.process(plain, wire, &mut closed);
        self.release_incoming();
        if result.is_err() {
            self.fail(wire);
        }
        result?;
        Ok(if closed {
            LayerState::PeerClosed
        } else {
            LayerState::Open
        })
    }

    /// Encrypts `data` into `wire` (nothing when empty).
    fn send(&mut self, data: &[u8], wire: &mut BytesMut) -> Result<(), LayerError> {
        if data.is_empty() {
            return Ok(());
        }
        if self.failed {
            return Err(LayerError::new("TLS: the session already failed"));
        }
        let sent = self.with_write_traffic(wire, |traffic, wire| encrypt(traffic, data, wire));
        if sent.is_err() {
            self.failed = true;
        }
        sent
    }

    /// The receive buffer's allocation: a partial record, or the records of a handshake
    /// message not yet complete.
    fn held(&self) -> usize {
        self.incoming.capacity()
    }

    /// A close_notify alert into `wire`, when the handshake finished.
    fn close(&mut self, wire: &mut BytesMut) {
        if self.failed {
            return;
        }
        self.failed = true;
        let _ = self.with_write_traffic(wire, |traffic, wire| {
            grow_until_fits(wire, RECORD_OVERHEAD, |buf| traffic.queue_close_notify(buf))
        });
    }
}

/// Encrypts `data` (as many records as it needs) into `wire`.
fn encrypt(
    traffic: &mut WriteTraffic<'_, rustls::server::ServerConnectionData>,
    data: &[u8],
    wire: &mut BytesMut,
) -> Result<(), LayerError> {
    let records = data.len() / MAX_FRAGMENT + 1;
    let guess = data.len() + records * RECORD_OVERHEAD;
    grow_until_fits(wire, guess, |buf| traffic.encrypt(data, buf))
}

/// An error that says how large the output must be.
trait NeedsRoom {
    fn required(&self) -> Option<usize>;
}

impl NeedsRoom for EncodeError {
    fn required(&self) -> Option<usize> {
        match self {
            Self::InsufficientSize(InsufficientSizeError { required_size }) => Some(*required_size),
            _ => None,
        }
    }
}

impl NeedsRoom for EncryptError {
    fn required(&self) -> Option<usize> {
        match self {
            Self::InsufficientSize(InsufficientSizeError { required_size }) => Some(*required_size),
            _ => None,
        }
    }
}

/// Appends to `wire` what `fill` writes into a buffer of `guess` bytes, growing the buffer to
/// the size rustls asks for when it is too small.
fn grow_until_fits<E: NeedsRoom + std::fmt::Display>(
    wire: &mut BytesMut,
    guess: usize,
    mut fill: impl FnMut(&mut [u8]) -> Result<usize, E>,
) -> Result<(), LayerError> {
    let start = wire.len();
    let mut room = guess;
    loop {
        wire.resize(start + room, 0);
        match fill(&mut wire[start..]) {
            Ok(written) => {
                wire.truncate(start + written);
                return Ok(());
            }
            Err(error) => {
                wire.truncate(start);
                match error.required() {
                    Some(required) if required > room => room = required,
                    _ => return Err(LayerError::new(format!("TLS: {error}"))),
                }
            }
        }
    }
}
