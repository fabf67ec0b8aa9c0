//! What both WebSocket sides share: the in-memory pipe tungstenite reads and writes, the
//! session's states, the frame reader of an open session, its close and the binary frame of a
//! turn's MQTT bytes.

use std::cell::RefCell;
use std::io::{self, Read, Write};
use std::rc::Rc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ring_runtime::{LayerError, LayerState};
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::{Message, WebSocket};

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
pub(super) struct PipeStream(Rc<RefCell<Pipe>>);

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

/// An open WebSocket over the pipe.
pub(super) type Socket = WebSocket<PipeStream>;

/// A session's state; `H` is the side's handshake in progress.
pub(super) enum State<H> {
    Upgrading(Box<H>),
    Open(Box<Socket>),
    /// Failed or closed: nothing more is read or written.
    Done,
}

/// A session: the pipe and its state.
pub(super) struct Session<H> {
    pipe: Rc<RefCell<Pipe>>,
    pub(super) state: State<H>,
}

impl<H> Session<H> {
    /// A session whose handshake `start` begins on a fresh pipe.
    pub(super) fn start<E>(start: impl FnOnce(PipeStream) -> Result<H, E>) -> Result<Self, E> {
        let pipe = Rc::new(RefCell::new(Pipe::default()));
        let handshake = start(PipeStream(Rc::clone(&pipe)))?;
        Ok(Self {
            pipe,
            state: State::Upgrading(Box::new(handshake)),
        })
    }

    /// Received bytes, for tungstenite to read.
    pub(super) fn feed(&self, input: &[u8]) {
        self.pipe.borrow_mut().input.extend_from_slice(input);
    }

    /// What tungstenite wrote since the last call.
    pub(super) fn take_output(&self) -> BytesMut {
        self.pipe.borrow_mut().take_output()
    }

    /// Reads every complete frame in the pipe (binary payloads are MQTT bytes, to `plain`);
    /// the session stays open while the peer has not closed it.
    pub(super) fn read_frames(
        &mut self,
        mut socket: Box<Socket>,
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

    /// A close frame, when the session is open.
    pub(super) fn close(&mut self, wire: &mut BytesMut) {
        if let State::Open(socket) = &mut self.state {
            let _ = socket.close(None);
            let _ = socket.flush();
            wire.extend_from_slice(&self.take_output());
        }
        self.state = State::Done;
    }
}

/// Formats `plain` as one binary frame into `wire` (nothing when there are no bytes), masked
/// with `mask` when given (a client's frames are, a server's are not).
pub(super) fn binary_frame(
    plain: &[Bytes],
    mask: Option<[u8; 4]>,
    wire: &mut BytesMut,
) -> Result<(), LayerError> {
    let len: usize = plain.iter().map(Bytes::len).sum();
    if len == 0 {
        return Ok(());
    }
    let header = FrameHeader {
        opcode: OpCode::Data(Data::Binary),
        mask,
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
    if let Some(mask) = mask {
        apply_mask(&mut wire[start..], mask);
    }
    Ok(())
}

/// XORs `payload` with the frame mask (RFC 6455 section 5.3).
pub(crate) fn apply_mask(payload: &mut [u8], mask: [u8; 4]) {
    let mut words = payload.chunks_exact_mut(4);
    for word in &mut words {
        for (byte, key) in word.iter_mut().zip(mask) {
            *byte ^= key;
        }
    }
    for (byte, key) in words.into_remainder().iter_mut().zip(mask) {
        *byte ^= key;
    }
}
