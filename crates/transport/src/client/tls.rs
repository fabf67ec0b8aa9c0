//! The TLS side of a client layer: rustls' `ClientConnection` driven from received bytes.

use std::io::{Read, Write};

use bytes::{BufMut, BytesMut};
use ring_runtime::{LayerError, LayerState};
use rustls::ClientConnection;

use crate::stack::{TlsHalf, tls_error};

impl TlsHalf for ClientConnection {
    /// Decrypts `input`: plaintext to `plain`, handshake messages and alerts to `wire`.
    fn receive(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        wire: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        let mut rest = input;
        let mut state = LayerState::Open;
        while !rest.is_empty() {
            if self.read_tls(&mut rest).map_err(tls_error)? == 0 {
                return Err(LayerError::new("TLS: record buffer full"));
            }
            let io = match self.process_new_packets() {
                Ok(io) => io,
                Err(error) => {
                    // The alert that tells the server why.
                    let _ = drain_tls(self, wire);
                    return Err(tls_error(error));
                }
            };
            let len = io.plaintext_bytes_to_read();
            if len > 0 {
                let start = plain.len();
                plain.resize(start + len, 0);
                self.reader()
                    .read_exact(&mut plain[start..])
                    .map_err(tls_error)?;
            }
            if io.peer_has_closed() {
                state = LayerState::PeerClosed;
            }
        }
        // Handshake messages, and the plaintext rustls held until the handshake ended.
        drain_tls(self, wire)?;
        Ok(state)
    }

    /// Encrypts `data` into `wire`; before the handshake ends rustls keeps the plaintext and
    /// `wire` gets the handshake messages.
    fn send(&mut self, data: &[u8], wire: &mut BytesMut) -> Result<(), LayerError> {
        self.writer().write_all(data).map_err(tls_error)?;
        drain_tls(self, wire)
    }

    fn close(&mut self, wire: &mut BytesMut) {
        self.send_close_notify();
        let _ = drain_tls(self, wire);
    }
}

/// Moves every TLS record rustls has ready into `wire`.
fn drain_tls(tls: &mut ClientConnection, wire: &mut BytesMut) -> Result<(), LayerError> {
    let mut writer = wire.writer();
    while tls.wants_write() {
        tls.write_tls(&mut writer).map_err(tls_error)?;
    }
    Ok(())
}
