//! [`Stack`]: one connection's stream layer, the same on both sides. TLS is outermost;
//! WebSocket framing runs on its plaintext. The halves are the side's own: rustls' server or
//! client connection ([`TlsHalf`]), the WebSocket server or client ([`WsHalf`]).

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use ring_runtime::{LayerError, LayerOutput, LayerState, StreamLayer};

use crate::hold::{HeldOver, Hold};

/// What a listener (or a client's connection) adds on top of TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Nothing: plain TCP.
    Plain,
    /// TLS.
    Tls,
    /// WebSocket.
    Ws,
    /// WebSocket over TLS.
    Wss,
}

impl TransportKind {
    /// Its name in the config file and the metrics' `listener` label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "tcp",
            Self::Tls => "tls",
            Self::Ws => "ws",
            Self::Wss => "wss",
        }
    }
}

/// A TLS session, server or client side.
pub trait TlsHalf {
    /// Decrypts what arrived: plaintext to `plain`, handshake messages and alerts to `wire`.
    fn receive(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        wire: &mut BytesMut,
    ) -> Result<LayerState, LayerError>;

    /// Encrypts `data` into `wire` (with pending handshake messages, which a side may still
    /// have when `data` is empty).
    fn send(&mut self, data: &[u8], wire: &mut BytesMut) -> Result<(), LayerError>;

    /// A close_notify alert into `wire`.
    fn close(&mut self, wire: &mut BytesMut);

    /// Bytes kept between two receives (a partial record); a side never bounded says 0.
    fn held(&self) -> usize {
        0
    }
}

/// A WebSocket session, server or client side.
pub trait WsHalf {
    /// Feeds received bytes: MQTT bytes go to `plain`; upgrade answers, pongs and close
    /// replies to `reply`.
    fn receive(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError>;

    /// Frames a turn's MQTT bytes into `wire`.
    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError>;

    /// A close frame into `wire`, when the session is open.
    fn close(&mut self, wire: &mut BytesMut);

    /// Bytes kept between two receives (the upgrade request, a partial frame header); a side
    /// never bounded says 0.
    fn held(&self) -> usize {
        0
    }
}

/// One connection's transport state, kept on the shard that owns the connection: a TLS half,
/// a WebSocket half, either or both, what only one side keeps (`side`), and, when bounded, the
/// charge for what the halves hold between receives.
pub struct Stack<T, W, S> {
    tls: Option<Box<T>>,
    ws: Option<Box<W>>,
    side: S,
    hold: Option<Hold>,
}

impl<T, W, S> Stack<T, W, S> {
    pub(crate) fn new(tls: Option<T>, ws: Option<W>, side: S) -> Self {
        Self {
            tls: tls.map(Box::new),
            ws: ws.map(Box::new),
            side,
            hold: None,
        }
    }

    /// Bounds what the halves hold between receives (checked after each).
    pub(crate) fn set_hold(&mut self, hold: Hold) {
        self.hold = Some(hold);
    }

    /// The bound a receive found exceeded, when that is why the layer failed.
    pub fn held_over(&self) -> Option<HeldOver> {
        self.hold.as_ref().and_then(Hold::over)
    }

    /// What this layer adds on top of TCP.
    pub fn kind(&self) -> TransportKind {
        match (self.tls.is_some(), self.ws.is_some()) {
            (false, false) => TransportKind::Plain,
            (true, false) => TransportKind::Tls,
            (false, true) => TransportKind::Ws,
            (true, true) => TransportKind::Wss,
        }
    }

    pub(crate) fn tls(&self) -> Option<&T> {
        self.tls.as_deref()
    }

    pub(crate) fn side(&self) -> &S {
        &self.side
    }
}

impl<T: TlsHalf, W: WsHalf, S> Stack<T, W, S> {
    /// Bytes the halves keep between receives.
    pub fn held(&self) -> usize {
        self.tls.as_deref().map_or(0, T::held) + self.ws.as_deref().map_or(0, W::held)
    }

    /// Runs received bytes through the halves.
    fn pass(&mut self, input: Bytes, out: &mut LayerOutput) -> Result<LayerState, LayerError> {
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
        if !reply.is_empty() {
            tls.send(&reply, &mut out.wire)?;
        }
        match ws_state? {
            LayerState::Open => Ok(tls_state),
            closed => Ok(closed),
        }
    }
}

impl<T: TlsHalf + 'static, W: WsHalf + 'static, S: 'static> StreamLayer for Stack<T, W, S> {
    /// Runs received bytes through the halves, then charges what they now hold (when bounded).
    fn receive(&mut self, input: Bytes, out: &mut LayerOutput) -> Result<LayerState, LayerError> {
        let state = self.pass(input, out)?;
        if self.hold.is_some() {
            let held = self.held();
            self.hold
                .as_mut()
                .map_or(Ok(()), |hold| hold.account(held))?;
        }
        Ok(state)
    }

    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        match (self.tls.as_deref_mut(), self.ws.as_deref_mut()) {
            (None, Some(ws)) => ws.send(plain, wire),
            (Some(tls), None) => match plain {
                [] => tls.send(&[], wire),
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

/// A TLS failure as a layer error.
pub(crate) fn tls_error(error: impl fmt::Display) -> LayerError {
    LayerError::new(format!("TLS: {error}"))
}
