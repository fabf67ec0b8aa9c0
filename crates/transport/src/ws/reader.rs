//! The server's reader of an open WebSocket (RFC 6455 section 5). Frames are read as their
//! bytes arrive and a binary frame's payload goes to MQTT at once, a fragment or part of one at
//! a time (MQTT packets need not line up with frames, MQTT-6.0.0-2): no message is assembled
//! here. Between two reads the reader keeps at most a frame header not yet complete (14 bytes)
//! and a control frame's payload (125 bytes); what MQTT has not decoded yet is the broker's
//! partial packet, counted there.
//!
//! A message whose fragments announce more than the largest message is refused (close 1009)
//! at the header that takes it over, before any of that frame's payload is read.

use bytes::{BufMut, BytesMut};

use super::pipe::apply_mask;

/// The longest frame header: 2 bytes, a 64-bit length and the mask.
const MAX_HEADER: usize = 14;
/// The longest control frame payload (RFC 6455 section 5.5).
const MAX_CONTROL: u64 = 125;

/// Frame opcodes (RFC 6455 section 5.2).
const CONTINUATION: u8 = 0x0;
const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;

/// Close status codes (RFC 6455 section 7.4.1).
const PROTOCOL_ERROR: u16 = 1002;
const UNSUPPORTED_DATA: u16 = 1003;
const MESSAGE_TOO_BIG: u16 = 1009;

/// Why the reader ended the session; its close frame is already in the reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The peer broke RFC 6455 (close 1002).
    Protocol(&'static str),
    /// A text frame: MQTT travels in binary frames (close 1003).
    Text,
    /// The message's fragments announce `announced` bytes, over `max` (close 1009).
    TooBig { announced: u64, max: u64 },
}

impl Refusal {
    /// The close status code sent for it.
    pub(crate) fn code(&self) -> u16 {
        match self {
            Self::Protocol(_) => PROTOCOL_ERROR,
            Self::Text => UNSUPPORTED_DATA,
            Self::TooBig { .. } => MESSAGE_TOO_BIG,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Protocol(what) => write!(f, "WebSocket protocol error: {what}"),
            Self::Text => f.write_str("WebSocket text frame (MQTT travels in binary frames)"),
            Self::TooBig { announced, max } => write!(
                f,
                "WebSocket message of at least {announced} bytes over the largest accepted ({max})"
            ),
        }
    }
}

/// What a read ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// More frames may come.
    Open,
    /// The peer sent a close frame (answered in the reply).
    Closed,
}

/// The frame whose payload is being read.
struct Frame {
    opcode: u8,
    /// Payload bytes still to come.
    remaining: u64,
    mask: [u8; 4],
    /// Payload bytes read so far (where the mask continues).
    read: usize,
}

/// A frame header as decoded.
struct Header {
    fin: bool,
    opcode: u8,
    len: u64,
    mask: [u8; 4],
}

/// One open server-side WebSocket's reader.
pub(crate) struct FrameReader {
    max_message: u64,
    /// Bytes announced so far by the fragments of the data message in progress; `None` between
    /// messages.
    message: Option<u64>,
    /// A header split between reads.
    header: Vec<u8>,
    /// The frame whose payload is being read.
    frame: Option<Frame>,
    /// A control frame's payload so far.
    control: Vec<u8>,
}

impl FrameReader {
    /// A reader refusing messages over `max_message` bytes.
    pub(crate) fn new(max_message: usize) -> Self {
        Self {
            max_message: max_message as u64,
            message: None,
            header: Vec::new(),
            frame: None,
            control: Vec::new(),
        }
    }

    /// Bytes kept between reads: a partial header and a partial control payload.
    pub(crate) fn held(&self) -> usize {
        self.header.capacity() + self.control.capacity()
    }

    /// Reads `input`: binary payload bytes (unmasked) to `plain`, pongs and close frames to
    /// `reply`. On a refusal its close frame is in `reply` and nothing more may be read.
    pub(crate) fn read(
        &mut self,
        mut input: &[u8],
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<Reading, Refusal> {
        loop {
            if self.frame.is_none() {
                match self.next_header(&mut input) {
                    Ok(Some(frame)) => self.frame = Some(frame),
                    Ok(None) => return Ok(Reading::Open),
                    Err(refusal) => {
                        close_frame(refusal.code(), &refusal.to_string(), reply);
                        return Err(refusal);
                    }
                }
            }
            let Some(frame) = self.frame.as_mut() else {
                return Ok(Reading::Open);
            };
            let take = input
                .len()
                .min(usize::try_from(frame.remaining).unwrap_or(usize::MAX));
            let (payload, rest) = input.split_at(take);
            input = rest;
            let mask = mask_at(frame.mask, frame.read);
            if frame.opcode == BINARY || frame.opcode == CONTINUATION {
                let start = plain.len();
                plain.extend_from_slice(payload);
                apply_mask(&mut plain[start..], mask);
            } else {
                // A control payload is at most 125 bytes: kept until the frame is complete.
                let start = self.control.len();
                self.control.extend_from_slice(payload);
                apply_mask(&mut self.control[start..], mask);
            }
            frame.read += take;
            frame.remaining -= take as u64;
            if frame.remaining > 0 {
                return Ok(Reading::Open);
            }
            let opcode = frame.opcode;
            self.frame = None;
            if self.finish(opcode, reply) == Reading::Closed {
                return Ok(Reading::Closed);
            }
        }
    }

    /// The next frame's header from the partial one kept and `input` (what it used is taken
    /// off `input`); `None` when it is not complete yet (what arrived is kept).
    fn next_header(&mut self, input: &mut &[u8]) -> Result<Option<Frame>, Refusal> {
        if self.header.is_empty()
            && let Some(len) = header_len(input)
            && input.len() >= len
        {
            let header = decode_header(&input[..len])?;
            *input = &input[len..];
            return self.start_frame(header).map(Some);
        }
        loop {
            let need = header_len(&self.header).unwrap_or(2);
            if self.header.len() >= need {
                break;
            }
            let Some((&byte, rest)) = input.split_first() else {
                return Ok(None);
            };
            if self.header.capacity() == 0 {
                self.header.reserve_exact(MAX_HEADER);
            }
            self.header.push(byte);
            *input = rest;
        }
        let header = decode_header(&self.header)?;
        // An idle connection keeps no header buffer.
        self.header = Vec::new();
        self.start_frame(header).map(Some)
    }

    /// Checks a header against the frame order and the message bound.
    fn start_frame(&mut self, header: Header) -> Result<Frame, Refusal> {
        match header.opcode {
            TEXT => return Err(Refusal::Text),
            BINARY if self.message.is_some() => {
                return Err(Refusal::Protocol("a new message before the last one ended"));
            }
            CONTINUATION if self.message.is_none() => {
                return Err(Refusal::Protocol("a continuation frame outside a message"));
            }
            BINARY | CONTINUATION => {
                let announced = self.message.unwrap_or(0).saturating_add(header.len);
                if announced > self.max_message {
                    return Err(Refusal::TooBig {
                        announced,
                        max: self.max_message,
                    });
                }
                self.message = (!header.fin).then_some(announced);
            }
            CLOSE | PING | PONG => {
                if !header.fin {
                    return Err(Refusal::Protocol("a fragmented control frame"));
                }
                if header.len > MAX_CONTROL {
                    return Err(Refusal::Protocol("a control frame over 125 bytes"));
                }
            }
            _ => return Err(Refusal::Protocol("an unknown opcode")),
        }
        Ok(Frame {
            opcode: header.opcode,
            remaining: header.len,
            mask: header.mask,
            read: 0,
        })
    }

    /// A frame was read to its end: a ping is answered, a close is answered and ends reading.
    fn finish(&mut self, opcode: u8, reply: &mut BytesMut) -> Reading {
        let control = std::mem::take(&mut self.control);
        match opcode {
            PING => {
                frame(PONG, &control, reply);
                Reading::Open
            }
            CLOSE => {
                // The reply echoes the status code, if the peer sent one (section 5.5.1).
                frame(CLOSE, control.get(..2).unwrap_or_default(), reply);
                Reading::Closed
            }
            _ => Reading::Open,
        }
    }
}

/// The length of the header starting `bytes` (`None` before its second byte).
fn header_len(bytes: &[u8]) -> Option<usize> {
    let second = *bytes.get(1)?;
    let extended = match second & 0x7F {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let mask = if second & 0x80 != 0 { 4 } else { 0 };
    Some(2 + extended + mask)
}

/// Decodes a complete header (`bytes` is exactly its length).
fn decode_header(bytes: &[u8]) -> Result<Header, Refusal> {
    let (first, second) = (bytes[0], bytes[1]);
    if first & 0x70 != 0 {
        return Err(Refusal::Protocol(
            "reserved bits set (no extension was agreed)",
        ));
    }
    if second & 0x80 == 0 {
        return Err(Refusal::Protocol("a client frame without a mask"));
    }
    let (len, rest) = match second & 0x7F {
        126 => (
            u64::from(u16::from_be_bytes([bytes[2], bytes[3]])),
            &bytes[4..],
        ),
        127 => {
            let mut long = [0u8; 8];
            long.copy_from_slice(&bytes[2..10]);
            let len = u64::from_be_bytes(long);
            if len >> 63 != 0 {
                return Err(Refusal::Protocol("a payload length with its top bit set"));
            }
            (len, &bytes[10..])
        }
        short => (u64::from(short), &bytes[2..]),
    };
    let mut mask = [0u8; 4];
    mask.copy_from_slice(&rest[..4]);
    Ok(Header {
        fin: first & 0x80 != 0,
        opcode: first & 0x0F,
        len,
        mask,
    })
}

/// The mask as it continues at payload offset `offset`.
fn mask_at(mask: [u8; 4], offset: usize) -> [u8; 4] {
    std::array::from_fn(|i| mask[(offset + i) % 4])
}

/// An unmasked server frame (fin set) with a payload of at most 125 bytes into `wire`.
pub(crate) fn frame(opcode: u8, payload: &[u8], wire: &mut BytesMut) {
    let len = payload.len().min(MAX_CONTROL as usize);
    wire.put_u8(0x80 | opcode);
    wire.put_u8(len as u8);
    wire.put_slice(&payload[..len]);
}

/// A close frame with `code` and as much of `reason` as fits.
pub(crate) fn close_frame(code: u16, reason: &str, wire: &mut BytesMut) {
    let mut payload = code.to_be_bytes().to_vec();
    let room = MAX_CONTROL as usize - payload.len();
    let cut = (0..=reason.len().min(room))
        .rev()
        .find(|&at| reason.is_char_boundary(at))
        .unwrap_or(0);
    payload.extend_from_slice(&reason.as_bytes()[..cut]);
    frame(CLOSE, &payload, wire);
}

/// A close frame with no status (a graceful close by the broker).
pub(crate) fn goodbye(wire: &mut BytesMut) {
    frame(CLOSE, &[], wire);
}
