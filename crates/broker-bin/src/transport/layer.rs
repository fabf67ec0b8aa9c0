//! [`MqttTransport`]: the stream layer of a TLS, WebSocket or secure WebSocket connection.
//! TLS (a rustls `ServerConnection`) is outermost; WebSocket framing runs on its plaintext.

use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};
use ring_runtime::{LayerError, LayerOutput, LayerState, StreamLayer};
use rustls::server::UnbufferedServerConnection;

use super::tls::common_name;
use super::tls_session::TlsSession;
use super::ws::WsSession;

/// One connection's transport state, kept on the shard that owns the connection.
pub(crate) struct MqttTransport {
    tls: Option<Box<TlsSession>>,
    ws: Option<Box<WsSession>>,
    peer: SocketAddr,
    /// The listener makes the client certificate's CN the username.
    identity_as_username: bool,
}

impl MqttTransport {
    pub(crate) fn new(
        tls: Option<UnbufferedServerConnection>,
        ws: Option<WsSession>,
        peer: SocketAddr,
        identity_as_username: bool,
    ) -> Self {
        Self {
            tls: tls.map(|conn| Box::new(TlsSession::new(conn))),
            ws: ws.map(Box::new),
            peer,
            identity_as_username,
        }
    }

    pub(crate) fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The kind of listener this layer serves.
    pub(crate) fn listener(&self) -> crate::metrics::Listener {
        use crate::metrics::Listener;
        match (self.tls.is_some(), self.ws.is_some()) {
            (false, false) => Listener::Tcp,
            (true, false) => Listener::Tls,
            (false, true) => Listener::Ws,
            (true, true) => Listener::Wss,
        }
    }

    /// For a listener with `identity_as_username`: the verified client certificate's Common
    /// Name (`Err` when there is none). `None` for other listeners.
    pub(crate) fn username_from_certificate(&self) -> Option<Result<String, ()>> {
        if !self.identity_as_username {
            return None;
        }
        let certs = self.tls.as_deref().and_then(TlsSession::peer_certificates);
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
            return tls.receive(&input, &mut out.plain, &mut out.wire);
        };
        let mut decrypted = BytesMut::new();
        let tls_state = tls.receive(&input, &mut decrypted, &mut out.wire)?;
        let mut reply = BytesMut::new();
        let ws_state = ws.receive(&decrypted, &mut out.plain, &mut reply);
        tls.send(&reply, &mut out.wire)?;
        match ws_state? {
            LayerState::Open => Ok(tls_state),
            closed => Ok(closed),
        }
    }

    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        match (self.tls.as_deref_mut(), self.ws.as_deref_mut()) {
            (None, Some(ws)) => ws.send(plain, wire),
            (Some(tls), None) => match plain {
                [] => Ok(()),
                [one] => tls.send(one, wire),
                many => tls.send(&join(many), wire),
            },
            (Some(tls), Some(ws)) => {
                let mut framed = BytesMut::new();
                ws.send(plain, &mut framed)?;
                tls.send(&framed, wire)
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
                let _ = tls.send(&goodbye, wire);
                tls.close(wire);
            }
        }
    }
}

/// A turn's frames as one buffer: encrypted as few full records instead of one per frame.
fn join(frames: &[Bytes]) -> BytesMut {
    let mut joined = BytesMut::with_capacity(frames.iter().map(Bytes::len).sum());
    for frame in frames {
        joined.put_slice(frame);
    }
    joined
}
