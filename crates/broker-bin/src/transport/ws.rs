//! MQTT over WebSocket (RFC 6455, subprotocol `mqtt`) with tungstenite: its server handshake
//! and frame reader run over an in-memory pipe fed by the layer; outbound MQTT bytes leave as
//! one binary frame per turn, with tungstenite's frame header.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::rc::Rc;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ring_runtime::{LayerError, LayerState};
use tungstenite::handshake::server::{Callback, ErrorResponse, Request, Response, ServerHandshake};
use tungstenite::handshake::{HandshakeError, MidHandshake};
use tungstenite::http::{HeaderValue, StatusCode};
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::{Message, WebSocket, WebSocketConfig};

/// Subprotocols accepted, in order of preference (`mqttv3.1` is what MQTT 3.1 clients send).
const SUBPROTOCOLS: [&str; 2] = ["mqtt", "mqttv3.1"];

/// The largest upgrade request accepted (headers included).
const MAX_UPGRADE_REQUEST: usize = 8 * 1024;

/// Bytes between the layer and tungstenite. Shared (not owned by tungstenite's stream) so a
/// refusal written by a failing handshake can still be sent.
#[derive(Default)]
struct Pipe {
    input: BytesMut,
    output: BytesMut,
}

impl Pipe {
    /// What tungstenite wrote; the pipe keeps no allocation afterwards.
    fn take_output(&mut self) -> BytesMut {
        std::mem::take(&mut self.output)
    }
}

/// tungstenite's view of the pipe: reads what arrived (`WouldBlock` when nothing has),
/// writes into the output.
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
        if pipe.input.is_empty() {
            // An idle connection keeps no receive allocation.
            pipe.input = BytesMut::new();
        }
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

/// Checks the upgrade request: the configured path and the `mqtt` subprotocol.
struct Upgrade {
    path: Arc<str>,
}

impl Callback for Upgrade {
    fn on_request(
        self,
        request: &Request,
        mut response: Response,
    ) -> Result<Response, ErrorResponse> {
        if request.uri().path() != &*self.path {
            return Err(refusal(
                StatusCode::NOT_FOUND,
                format!(
                    "no MQTT endpoint at {} (it is at {})",
                    request.uri().path(),
                    self.path
                ),
            ));
        }
        let offered: Vec<&str> = request
            .headers()
            .get_all("Sec-WebSocket-Protocol")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|list| list.split(',').map(str::trim))
            .collect();
        let Some(chosen) = SUBPROTOCOLS.iter().find(|p| offered.contains(p)) else {
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                "the upgrade does not offer the `mqtt` WebSocket subprotocol".to_owned(),
            ));
        };
        response
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", HeaderValue::from_static(chosen));
        Ok(response)
    }
}

fn refusal(status: StatusCode, reason: String) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(reason));
    *response.status_mut() = status;
    response
}

type Handshake = MidHandshake<ServerHandshake<PipeStream, Upgrade>>;

enum State {
    Upgrading(Box<Handshake>),
    Open(Box<WebSocket<PipeStream>>),
    /// Failed or closed: nothing more is read or written.
    Done,
}

/// One connection's WebSocket side.
pub(crate) struct WsSession {
    pipe: Rc<RefCell<Pipe>>,
    state: State,
    upgrade_bytes: usize,
}

impl WsSession {
    /// A session waiting for its upgrade request at `path`; messages above `max_message`
    /// bytes are refused.
    pub(crate) fn new(path: Arc<str>, max_message: usize) -> Self {
        let pipe = Rc::new(RefCell::new(Pipe::default()));
        let config = WebSocketConfig::default()
            // tungstenite allocates its read buffer up front: small, since an idle connection
            // keeps it (a larger frame reserves what it needs).
            .read_buffer_size(256)
            .write_buffer_size(0)
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message));
        let stream = PipeStream(Rc::clone(&pipe));
        let handshake = ServerHandshake::start(stream, Upgrade { path }, Some(config));
        Self {
            pipe,
            state: State::Upgrading(Box::new(handshake)),
            upgrade_bytes: 0,
        }
    }

    /// Feeds received bytes: MQTT bytes go to `plain`, handshake answers, pongs and close
    /// replies to `reply`.
    pub(crate) fn receive(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        self.pipe.borrow_mut().input.extend_from_slice(input);
        let result = match std::mem::replace(&mut self.state, State::Done) {
            State::Upgrading(handshake) => {
                self.upgrade_bytes += input.len();
                self.upgrade(*handshake)
            }
            State::Open(socket) => self.read_frames(socket, plain),
            State::Done => Ok(LayerState::PeerClosed),
        };
        reply.extend_from_slice(&self.pipe.borrow_mut().take_output());
        result
    }

    fn upgrade(&mut self, handshake: Handshake) -> Result<LayerState, LayerError> {
        match handshake.handshake() {
            Ok(socket) => {
                self.state = State::Open(Box::new(socket));
                Ok(LayerState::Open)
            }
            Err(HandshakeError::Interrupted(handshake)) => {
                if self.upgrade_bytes > MAX_UPGRADE_REQUEST {
                    return Err(LayerError::new(format!(
                        "WebSocket upgrade request longer than {MAX_UPGRADE_REQUEST} bytes"
                    )));
                }
                self.state = State::Upgrading(Box::new(handshake));
                Ok(LayerState::Open)
            }
            Err(HandshakeError::Failure(error)) => Err(upgrade_error(error)),
        }
    }

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
                    // tungstenite queued the close reply; flushing writes it to the pipe.
                    let _ = socket.flush();
                    return Ok(LayerState::PeerClosed);
                }
                Err(tungstenite::Error::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => {
                    // Pongs queued by pings leave now.
                    let _ = socket.flush();
                    self.state = State::Open(socket);
                    return Ok(LayerState::Open);
                }
                Err(error) => return Err(LayerError::new(format!("WebSocket: {error}"))),
            }
        }
    }

    /// Frames a turn's MQTT bytes as one binary message into `wire`.
    pub(crate) fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        let len: usize = plain.iter().map(Bytes::len).sum();
        if len == 0 {
            return Ok(());
        }
        if !matches!(self.state, State::Open(_)) {
            return Err(LayerError::new(
                "MQTT bytes queued before the WebSocket upgrade",
            ));
        }
        let header = FrameHeader {
            opcode: OpCode::Data(Data::Binary),
            ..FrameHeader::default()
        };
        header
            .format(len as u64, &mut wire.writer())
            .map_err(|e| LayerError::new(format!("WebSocket frame header: {e}")))?;
        wire.reserve(len);
        for frame in plain {
            wire.put_slice(frame);
        }
        Ok(())
    }

    /// A close frame, when the session is open.
    pub(crate) fn close(&mut self, wire: &mut BytesMut) {
        if let State::Open(socket) = &mut self.state {
            let _ = socket.close(None);
            let _ = socket.flush();
            wire.extend_from_slice(&self.pipe.borrow_mut().take_output());
        }
        self.state = State::Done;
    }
}

/// A failed upgrade, with the reason the refusal carried.
fn upgrade_error(error: tungstenite::Error) -> LayerError {
    if let tungstenite::Error::Http(response) = &error {
        let reason = response
            .body()
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        return LayerError::new(format!(
            "WebSocket upgrade refused ({}): {reason}",
            response.status()
        ));
    }
    LayerError::new(format!("WebSocket upgrade failed: {error}"))
}
