//! Stream layers: a byte transform between a connection's socket and its handler (TLS,
//! WebSocket framing). The handler sees and queues plain bytes as on any connection; the shard
//! passes what the socket reads through [`StreamLayer::receive`] and what the handler queued
//! through [`StreamLayer::send`] when the connection's next write starts (all frames together:
//! under write pacing, several turns' worth).
//!
//! A connection without a layer pays one flag test per receive and per queued frame.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::conn::{CloseMode, Conn};
use crate::ids::ConnId;
use crate::send_queue::SendQueue;

/// A byte transform owned by one connection, run on the shard that owns the connection.
pub trait StreamLayer: Any {
    /// Bytes read from the socket. Appends what the handler should read to `out.plain` and
    /// what must go back to the peer now (handshake messages, pongs, alerts) to `out.wire`.
    fn receive(&mut self, input: Bytes, out: &mut LayerOutput) -> Result<LayerState, LayerError>;

    /// The handler's queued bytes of one turn, in order (possibly none: a layer may still have
    /// handshake bytes to send). Appends the bytes for the socket to `wire`.
    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError>;

    /// A graceful close started: appends the layer's goodbye (a TLS close_notify, a WebSocket
    /// close frame) to `wire`. Called at most once.
    fn close(&mut self, wire: &mut BytesMut) {
        let _ = wire;
    }
}

/// What [`StreamLayer::receive`] produced.
#[derive(Default)]
pub struct LayerOutput {
    /// Plain bytes for the handler.
    pub plain: BytesMut,
    /// Bytes to send back on the socket.
    pub wire: BytesMut,
}

/// Whether the peer ended the stream inside the layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerState {
    /// More may come.
    Open,
    /// The peer closed the layer (TLS close_notify, WebSocket close): treated like a FIN.
    PeerClosed,
}

/// Why a layer gave up on its connection (handshake failure, bad framing, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerError(Box<str>);

impl LayerError {
    /// An error described by `message`.
    pub fn new(message: impl Into<Box<str>>) -> Self {
        Self(message.into())
    }
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LayerError {}

/// One layered connection's state: the layer and the plain frames queued this turn.
pub(crate) struct LayerSlot {
    layer: Box<dyn StreamLayer>,
    pub(crate) plain: SendQueue,
    /// `send` must run at the next write even without frames (just set: a client layer's
    /// handshake starts there).
    kick: bool,
    goodbye_sent: bool,
}

/// What waits in a connection's layer for the next write.
#[derive(Clone, Copy, Default)]
pub(crate) struct PlainWaiting {
    /// The layer must run (frames queued, a goodbye due, or just set).
    pub(crate) encode_due: bool,
    pub(crate) frames: u32,
    pub(crate) bytes: usize,
}

/// The shard's layered connections (none for a broker with plain listeners only).
#[derive(Default)]
pub(crate) struct Layers {
    slots: HashMap<ConnId, LayerSlot>,
    /// Reused output buffers.
    scratch: LayerOutput,
    frames: Vec<Bytes>,
}

impl Layers {
    pub(crate) fn insert(&mut self, conn: ConnId, layer: Box<dyn StreamLayer>) {
        let slot = LayerSlot {
            layer,
            plain: SendQueue::default(),
            kick: true,
            goodbye_sent: false,
        };
        self.slots.insert(conn, slot);
    }

    pub(crate) fn remove(&mut self, conn: ConnId) {
        self.slots.remove(&conn);
    }

    pub(crate) fn plain_queue(&mut self, conn: ConnId) -> Option<&mut SendQueue> {
        self.slots.get_mut(&conn).map(|slot| &mut slot.plain)
    }

    /// What waits in `conn`'s layer (nothing for a connection without one).
    pub(crate) fn waiting(&self, id: ConnId, conn: &Conn) -> PlainWaiting {
        if !conn.layered {
            return PlainWaiting::default();
        }
        let Some(slot) = self.slots.get(&id) else {
            return PlainWaiting::default();
        };
        let goodbye_due = conn.close == Some(CloseMode::Graceful) && !slot.goodbye_sent;
        PlainWaiting {
            encode_due: slot.kick || goodbye_due || slot.plain.has_unsent(),
            frames: slot.plain.frames_waiting(),
            bytes: slot.plain.queued_bytes(),
        }
    }

    pub(crate) fn queued_bytes(&self, conn: ConnId) -> usize {
        self.slots
            .get(&conn)
            .map_or(0, |slot| slot.plain.queued_bytes())
    }

    pub(crate) fn layer_mut(&mut self, conn: ConnId) -> Option<&mut dyn StreamLayer> {
        Some(self.slots.get_mut(&conn)?.layer.as_mut())
    }

    /// Runs received bytes through the layer; the output stays in the scratch buffers until
    /// taken with [`Self::take_output`].
    pub(crate) fn receive(
        &mut self,
        conn: ConnId,
        input: Bytes,
    ) -> Option<Result<LayerState, LayerError>> {
        let slot = self.slots.get_mut(&conn)?;
        Some(slot.layer.receive(input, &mut self.scratch))
    }

    /// The bytes the last [`Self::receive`] produced: (plain, wire), each `None` when empty.
    pub(crate) fn take_output(&mut self) -> (Option<Bytes>, Option<Bytes>) {
        let take = |buf: &mut BytesMut| (!buf.is_empty()).then(|| buf.split().freeze());
        (take(&mut self.scratch.plain), take(&mut self.scratch.wire))
    }

    /// Encodes what the handler queued for `conn` (and, when `closing`, the layer's goodbye);
    /// the bytes for the socket, if any.
    pub(crate) fn encode(
        &mut self,
        conn: ConnId,
        closing: bool,
    ) -> Option<Result<Bytes, LayerError>> {
        let slot = self.slots.get_mut(&conn)?;
        slot.kick = false;
        slot.plain.take_all(&mut self.frames);
        let wire = &mut self.scratch.wire;
        let sent = slot.layer.send(&self.frames, wire);
        self.frames.clear();
        if let Err(error) = sent {
            wire.clear();
            return Some(Err(error));
        }
        if closing && !slot.goodbye_sent {
            slot.goodbye_sent = true;
            slot.layer.close(wire);
        }
        (!wire.is_empty()).then(|| Ok(wire.split().freeze()))
    }
}
