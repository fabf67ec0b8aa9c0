//! The WebSocket side of a client layer: tungstenite's client handshake over an in-memory
//! pipe, one masked binary frame per turn.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;

use super::{SUBPROTOCOL, TransportError};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use ring_runtime::{LayerError, LayerState};
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::client::ClientHandshake;
use tungstenite::handshake::{HandshakeError, MidHandshake};
use tungstenite::http::HeaderValue;
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::{Message, WebSocket, WebSocketConfig};

/// Bytes between the layer and tungstenite.
#[derive(Default)]
struct Pipe {
    input: BytesMut,
    output: BytesMut,
}

/// tungstenite's view of the pipe: reads what arrived (`WouldBlock` when nothing has), writes
/// into the output.
struct PipeStream(Rc<RefCell<Pipe>>);

impl Read for PipeStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut pipe = self.0.borrow_mut();
        if pipe.input.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let len = buf.len().min(pipe.input.len());
        buf[..len].copy_from_slice(&pipe.input[..len]);
        pipe.input.advance(len);
        Ok(len)
    }
}

impl Write for PipeStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

type Handshake = MidHandshake<ClientHandshake<PipeStream>>;

enum WsState {
    /// Upgrade request written (or about to be), waiting for `101`.
    Upgrading(Box<Handshake>),
    Open(Box<WebSocket<PipeStream>>),
    /// Failed or closed.
    Done,
}

/// One connection's WebSocket client side.
pub(super) struct WsClient {
    pipe: Rc<RefCell<Pipe>>,
    state: WsState,
    /// MQTT bytes queued before the upgrade completed; sent as the first frame.
    early: BytesMut,
}

impl WsClient {
    /// A session whose upgrade request (GET `path`, subprotocol `mqtt`, a random key) is sent
    /// with the first [`Self::send`].
    pub(super) fn new(host: SocketAddr, path: &str) -> Result<Self, TransportError> {
        let mut request = format!("ws://{host}{path}")
            .into_client_request()
            .map_err(TransportError::WsRequest)?;
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_static(SUBPROTOCOL),
        );
        let config = WebSocketConfig::default()
            .read_buffer_size(4096)
            .write_buffer_size(0);
        let pipe = Rc::new(RefCell::new(Pipe::default()));
        let stream = PipeStream(Rc::clone(&pipe));
        let handshake = ClientHandshake::start(stream, request, Some(config))
            .map_err(TransportError::WsRequest)?;
        Ok(Self {
            pipe,
            state: WsState::Upgrading(Box::new(handshake)),
            early: BytesMut::new(),
        })
    }

    /// Feeds received bytes: MQTT bytes to `plain`; pongs, close replies and the MQTT bytes
    /// held back during the upgrade to `reply`.
    pub(super) fn receive(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        self.pipe.borrow_mut().input.extend_from_slice(input);
        let result = self.advance(plain, reply);
        reply.extend_from_slice(&self.pipe.borrow_mut().output.split());
        result
    }

    /// Moves the upgrade on and reads what frames arrived.
    fn advance(
        &mut self,
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        match std::mem::replace(&mut self.state, WsState::Done) {
            WsState::Upgrading(handshake) => match handshake.handshake() {
                Ok((socket, _response)) => {
                    // Whatever the handshake wrote goes before the first frame.
                    reply.extend_from_slice(&self.pipe.borrow_mut().output.split());
                    let early = self.early.split().freeze();
                    format_binary(std::slice::from_ref(&early), reply)?;
                    self.read_frames(Box::new(socket), plain)
                }
                Err(HandshakeError::Interrupted(handshake)) => {
                    self.state = WsState::Upgrading(Box::new(handshake));
                    Ok(LayerState::Open)
                }
                Err(HandshakeError::Failure(error)) => Err(LayerError::new(format!(
                    "WebSocket upgrade failed: {error}"
                ))),
            },
            WsState::Open(socket) => self.read_frames(socket, plain),
            WsState::Done => Ok(LayerState::PeerClosed),
        }
    }

    /// Reads every complete frame in the pipe: binary payloads are MQTT bytes.
    fn read_frames(
        &mut self,
        mut socket: Box<WebSocket<PipeStream>>,
        plain: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        loop {
            match socket.read() {
                Ok(Message::Binary(data)) => plain.extend_from_slice(&data),
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
                Ok(Message::Text(_)) => {
                    return Err(LayerError::new(
                        "WebSocket text frame (MQTT travels in binary frames)",
                    ));
                }
                Ok(Message::Close(_)) | Err(tungstenite::Error::ConnectionClosed) => {
                    // The close reply tungstenite queued goes to the pipe.
                    let _ = socket.flush();
                    return Ok(LayerState::PeerClosed);
                }
                Err(tungstenite::Error::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => {
                    // Pongs for pings leave now.
                    let _ = socket.flush();
                    self.state = WsState::Open(socket);
                    return Ok(LayerState::Open);
                }
                Err(error) => return Err(LayerError::new(format!("WebSocket: {error}"))),
            }
        }
    }

    /// A turn's MQTT bytes as one masked binary frame; before the upgrade completes they are
    /// held back and the upgrade request goes out instead.
    pub(super) fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        match self.state {
            WsState::Open(_) => format_binary(plain, wire),
            WsState::Upgrading(_) => {
                for frame in plain {
                    self.early.extend_from_slice(frame);
                }
                // No input arrived since the last receive: this writes the request (first
                // call) or finds nothing to read.
                let mut nothing = BytesMut::new();
                let result = self.advance(&mut nothing, wire);
                wire.extend_from_slice(&self.pipe.borrow_mut().output.split());
                result.map(drop)
            }
            WsState::Done if plain.iter().all(Bytes::is_empty) => Ok(()),
            WsState::Done => Err(LayerError::new(
                "MQTT bytes queued after the WebSocket closed",
            )),
        }
    }

    /// A close frame, when the session is open.
    pub(super) fn close(&mut self, wire: &mut BytesMut) {
        if let WsState::Open(socket) = &mut self.state {
            let _ = socket.close(None);
            let _ = socket.flush();
            wire.extend_from_slice(&self.pipe.borrow_mut().output.split());
        }
        self.state = WsState::Done;
    }
}

/// Formats `plain` as one masked binary frame (nothing when there are no bytes).
pub(super) fn format_binary(plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
    let len: usize = plain.iter().map(Bytes::len).sum();
    if len == 0 {
        return Ok(());
    }
    let mask: [u8; 4] = rand::random();
    let header = FrameHeader {
        opcode: OpCode::Data(Data::Binary),
        mask: Some(mask),
        ..FrameHeader::default()
    };
    header
        .format(len as u64, &mut wire.writer())
        .map_err(|e| LayerError::new(format!("WebSocket frame header: {e}")))?;
    let start = wire.len();
    wire.reserve(len);
    for frame in plain {
        wire.put_slice(frame);
    }
    apply_mask(&mut wire[start..], mask);
    Ok(())
}

/// XORs `payload` with the frame mask (RFC 6455 section 5.3).
pub(super) fn apply_mask(payload: &mut [u8], mask: [u8; 4]) {
    for (byte, key) in payload.iter_mut().zip(mask.iter().cycle()) {
        *byte ^= key;
    }
}
