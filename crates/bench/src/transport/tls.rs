//! The TLS side of a client layer: rustls' `ClientConnection` driven from received bytes.

use std::io::{Read, Write};

use super::tls_error;
use bytes::{BufMut, Bytes, BytesMut};
use ring_runtime::{LayerError, LayerState};
use rustls::ClientConnection;

/// Decrypts `input`: plaintext to `plain`, handshake messages and alerts to `wire`.
pub(super) fn tls_receive(
    tls: &mut ClientConnection,
    input: &[u8],
    plain: &mut BytesMut,
    wire: &mut BytesMut,
) -> Result<LayerState, LayerError> {
    let mut rest = input;
    let mut state = LayerState::Open;
    while !rest.is_empty() {
        if tls.read_tls(&mut rest).map_err(tls_error)? == 0 {
            return Err(LayerError::new("TLS: record buffer full"));
        }
        let io = match tls.process_new_packets() {
            Ok(io) => io,
            Err(error) => {
                // The alert that tells the server why.
                let _ = drain_tls(tls, wire);
                return Err(tls_error(error));
            }
        };
        let len = io.plaintext_bytes_to_read();
        if len > 0 {
            let start = plain.len();
            plain.resize(start + len, 0);
            tls.reader()
                .read_exact(&mut plain[start..])
                .map_err(tls_error)?;
        }
        if io.peer_has_closed() {
            state = LayerState::PeerClosed;
        }
    }
    // Handshake messages, and the plaintext rustls held until the handshake ended.
    drain_tls(tls, wire)?;
    Ok(state)
}

/// Encrypts `plain` (frames joined first: one record for many) into `wire`; before the
/// handshake ends rustls keeps the plaintext and `wire` gets the handshake messages.
pub(super) fn tls_send(
    tls: &mut ClientConnection,
    plain: &[Bytes],
    wire: &mut BytesMut,
) -> Result<(), LayerError> {
    if plain.len() > 1 {
        let mut joined = BytesMut::with_capacity(plain.iter().map(Bytes::len).sum());
        for frame in plain {
            joined.put_slice(frame);
        }
        tls.writer().write_all(&joined).map_err(tls_error)?;
    } else if let Some(frame) = plain.first() {
        tls.writer().write_all(frame).map_err(tls_error)?;
    }
    drain_tls(tls, wire)
}

/// Moves every TLS record rustls has ready into `wire`.
pub(super) fn drain_tls(tls: &mut ClientConnection, wire: &mut BytesMut) -> Result<(), LayerError> {
    let mut writer = wire.writer();
    while tls.wants_write() {
        tls.write_tls(&mut writer).map_err(tls_error)?;
    }
    Ok(())
}
