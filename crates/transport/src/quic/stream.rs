//! The MQTT stream's bytes both ways, for the server's [`super::conn::QuicConn`] and the
//! client's [`super::client_conn::ClientConn`]: [`Unsent`] holds what the handler queued and
//! the stream's flow control has not taken yet, [`read_stream`] hands the stream's bytes on in
//! order.

use std::collections::VecDeque;

use bytes::Bytes;
use quinn_proto::{Connection, StreamId};

/// Largest piece of the stream handed on at once.
const READ_CHUNK: usize = 64 * 1024;

/// Bytes the handler queued for the stream that it has not taken yet (flow control), in order.
#[derive(Default)]
pub(super) struct Unsent {
    frames: VecDeque<Bytes>,
    bytes: usize,
}

impl Unsent {
    /// Queues `frames` behind what waits.
    pub(super) fn push(&mut self, frames: &[Bytes]) {
        for frame in frames {
            self.bytes += frame.len();
            self.frames.push_back(frame.clone());
        }
    }

    /// Writes to `stream` what it takes now; whether nothing is left.
    pub(super) fn write_to(&mut self, quic: &mut Connection, stream: StreamId) -> bool {
        while let Some(front) = self.frames.front_mut() {
            match quic.send_stream(stream).write(front) {
                Ok(written) if written == front.len() => {
                    self.bytes -= written;
                    self.frames.pop_front();
                }
                Ok(written) => {
                    self.bytes -= written;
                    let _ = front.split_to(written);
                    break;
                }
                Err(_) => break,
            }
        }
        self.frames.is_empty()
    }

    /// Forgets what waits (the connection is gone).
    pub(super) fn clear(&mut self) {
        self.frames.clear();
        self.bytes = 0;
    }

    /// Bytes waiting.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// Hands `stream`'s bytes to `take`, in order, while it returns `true` and the stream has
/// more; whether the peer's end of the stream was reached.
pub(super) fn read_stream(
    quic: &mut Connection,
    stream: StreamId,
    mut take: impl FnMut(Bytes) -> bool,
) -> bool {
    let mut recv = quic.recv_stream(stream);
    let Ok(mut chunks) = recv.read(true) else {
        return false;
    };
    let mut finished = false;
    loop {
        match chunks.next(READ_CHUNK) {
            Ok(Some(chunk)) => {
                if !take(chunk.bytes) {
                    break;
                }
            }
            Ok(None) => {
                finished = true;
                break;
            }
            Err(_) => break,
        }
    }
    // Whether a window update must go out is what poll_transmit asks anyway.
    let _ = chunks.finalize();
    finished
}
