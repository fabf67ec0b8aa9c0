//! [`MqttTransport`]: the stream layer of a TLS, WebSocket or secure WebSocket connection.
//! TLS (a rustls `ServerConnection`) is outermost; WebSocket framing runs on its plaintext.

use std::io::{Read, Write};
use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};
use ring_runtime::{LayerError, LayerOutput, LayerState, StreamLayer};
use rustls::ServerConnection;

use super::tls::common_name;
use super::ws::WsSession;

/// One connection's transport state, kept on the shard that owns the connection.
pub(crate) struct MqttTransport {
    tls: Option<Box<ServerConnection>>,
    ws: Option<Box<WsSession>>,
    peer: SocketAddr,
    /// The listener makes the client certificate's CN the username.
    identity_as_username: bool,
}

impl MqttTransport {
    pub(crate) fn new(
        tls: Option<ServerConnection>,
        ws: Option<WsSession>,
        peer: SocketAddr,
        identity_as_username: bool,
    ) -> Self {
        let tls = tls.map(|mut tls| {
            // What the shard hands over is bounded by the broker's queue limits; rustls must
            // never refuse part of it.
            tls.set_buffer_limit(None);
            Box::new(tls)
        });
        Self {
            tls,
            ws: ws.map(Box::new),
            peer,
            identity_as_username,
        }
    }

    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// For a listener with `identity_as_username`: the verified client certificate's Common
    /// Name (`Err` when there is none). `None` for other listeners.
    pub(crate) fn username_from_certificate(&self) -> Option<Result<String, ()>> {
        if !self.identity_as_username {
            return None;
        }
        let certs = self.tls.as_ref().and_then(|tls| tls.peer_certificates());
        let cert = certs.and_then(<[_]>::first);
        Some(cert.and_then(common_name).ok_or(()))
    }
}

impl StreamLayer for MqttTransport {
    fn receive(&mut self, input: Bytes, out: &mut LayerOutput) -> Result<LayerState, LayerError> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return match self.ws.as_deref_mut() {
                Some(ws) => ws.receive(&input, &mut out.plain, &mut out.wire),
                None => {
                    out.plain.extend_from_slice(&input);
                    Ok(LayerState::Open)
                }
            };
        };
        let Some(ws) = self.ws.as_deref_mut() else {
            return tls_receive(tls, &input, &mut out.plain, &mut out.wire);
        };
        let mut decrypted = BytesMut::new();
        let tls_state = tls_receive(tls, &input, &mut decrypted, &mut out.wire)?;
        let mut reply = BytesMut::new();
        let ws_state = ws.receive(&decrypted, &mut out.plain, &mut reply);
        if !reply.is_empty() {
            tls_send(tls, &[reply.freeze()], &mut out.wire)?;
        }
        match ws_state? {
            LayerState::Open => Ok(tls_state),
            closed => Ok(closed),
        }
    }

    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        match (self.tls.as_deref_mut(), self.ws.as_deref_mut()) {
            (None, Some(ws)) => ws.send(plain, wire),
            (Some(tls), None) => tls_send(tls, plain, wire),
            (Some(tls), Some(ws)) => {
                let mut framed = BytesMut::new();
                ws.send(plain, &mut framed)?;
                tls_send(tls, &[framed.freeze()], wire)
            }
            (None, None) => {
                for frame in plain {
                    wire.extend_from_slice(frame);
                }
                Ok(())
            }
        }
    }

    fn close(&mut self, wire: &mut BytesMut) {
        let mut goodbye = BytesMut::new();
        if let Some(ws) = self.ws.as_deref_mut() {
            ws.close(&mut goodbye);
        }
        match self.tls.as_deref_mut() {
            None => wire.extend_from_slice(&goodbye),
            Some(tls) => {
                let _ = tls_send(tls, &[goodbye.freeze()], wire);
                tls.send_close_notify();
                let _ = drain_tls(tls, wire);
            }
        }
    }
}

/// Decrypts `input`: plaintext to `plain`, handshake messages and alerts to `wire`.
fn tls_receive(
    tls: &mut ServerConnection,
    input: &[u8],
    plain: &mut BytesMut,
    wire: &mut BytesMut,
) -> Result<LayerState, LayerError> {
    let mut rest = input;
    let mut state = LayerState::Open;
    while !rest.is_empty() {
        let read = tls
            .read_tls(&mut rest)
            .map_err(|e| LayerError::new(format!("TLS: {e}")))?;
        if read == 0 {
            return Err(LayerError::new("TLS: record buffer full"));
        }
        let io = match tls.process_new_packets() {
            Ok(io) => io,
            Err(error) => {
                // The alert that tells the peer why.
                let _ = drain_tls(tls, wire);
                return Err(LayerError::new(format!("TLS: {error}")));
            }
        };
        let len = io.plaintext_bytes_to_read();
        if len > 0 {
            let start = plain.len();
            plain.resize(start + len, 0);
            tls.reader()
                .read_exact(&mut plain[start..])
                .map_err(|e| LayerError::new(format!("TLS: {e}")))?;
        }
        if io.peer_has_closed() {
            state = LayerState::PeerClosed;
        }
    }
    drain_tls(tls, wire)?;
    Ok(state)
}

/// Encrypts `plain` (small frames joined first: one record for many) into `wire`.
fn tls_send(
    tls: &mut ServerConnection,
    plain: &[Bytes],
    wire: &mut BytesMut,
) -> Result<(), LayerError> {
    let write_error = |e: std::io::Error| LayerError::new(format!("TLS: {e}"));
    if plain.len() > 1 {
        let mut joined = BytesMut::with_capacity(plain.iter().map(Bytes::len).sum());
        for frame in plain {
            joined.put_slice(frame);
        }
        tls.writer().write_all(&joined).map_err(write_error)?;
    } else if let Some(frame) = plain.first() {
        tls.writer().write_all(frame).map_err(write_error)?;
    }
    drain_tls(tls, wire)
}

/// Moves every TLS record rustls has ready into `wire`.
fn drain_tls(tls: &mut ServerConnection, wire: &mut BytesMut) -> Result<(), LayerError> {
    let mut writer = wire.writer();
    while tls.wants_write() {
        tls.write_tls(&mut writer)
            .map_err(|e| LayerError::new(format!("TLS: {e}")))?;
    }
    Ok(())
}
