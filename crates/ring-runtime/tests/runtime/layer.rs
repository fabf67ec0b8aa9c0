//! Stream layers over real sockets: a toy layer with a greeting handshake and an XOR "cipher"
//! stands in for TLS and WebSocket framing.

use std::net::SocketAddr;
use std::sync::mpsc;

use bytes::{BufMut, Bytes, BytesMut};
use ring_runtime::{ConnId, Handler, LayerError, LayerOutput, LayerState, ShardCtx, StreamLayer};

use crate::common;

const GREETING: &[u8] = b"HI\n";
const KEY: u8 = 0x20;

/// Waits for [`GREETING`] (answering `OK`), then XORs every byte with [`KEY`]; a raw zero byte
/// ends the stream; a wrong greeting fails with `NO` sent back.
#[derive(Default)]
struct XorLayer {
    greeted: bool,
    greeting: Vec<u8>,
    sends: usize,
}

impl StreamLayer for XorLayer {
    fn receive(&mut self, input: Bytes, out: &mut LayerOutput) -> Result<LayerState, LayerError> {
        let mut data = &input[..];
        if !self.greeted {
            let wanted = (GREETING.len() - self.greeting.len()).min(data.len());
            self.greeting.extend_from_slice(&data[..wanted]);
            data = &data[wanted..];
            if !GREETING.starts_with(&self.greeting) {
                out.wire.put_slice(b"NO\n");
                return Err(LayerError::new("bad greeting"));
            }
            if self.greeting.len() < GREETING.len() {
                return Ok(LayerState::Open);
            }
            self.greeted = true;
            out.wire.put_slice(b"OK\n");
        }
        for &byte in data {
            if byte == 0 {
                return Ok(LayerState::PeerClosed);
            }
            out.plain.put_u8(byte ^ KEY);
        }
        Ok(LayerState::Open)
    }

    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        if !plain.is_empty() {
            self.sends += 1;
        }
        for frame in plain {
            wire.extend(frame.iter().map(|b| b ^ KEY));
        }
        Ok(())
    }

    fn close(&mut self, wire: &mut BytesMut) {
        wire.put_slice(b"BYE");
    }
}

/// Layers every accepted connection; echoes each read as two frames ("[" + data, "]") and
/// reports layer errors, ends and the layer's send count.
struct LayeredEcho {
    events: mpsc::Sender<String>,
}

impl Handler for LayeredEcho {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, _peer: SocketAddr) {
        let local = ctx.local_addr(conn).unwrap();
        self.events.send(format!("local {}", local.port())).unwrap();
        ctx.set_layer(conn, Box::new(XorLayer::default()));
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        if &data[..] == b"count" {
            let sends = ctx.layer_mut::<XorLayer>(conn).unwrap().sends;
            self.events.send(format!("sends {sends}")).unwrap();
            return;
        }
        ctx.send(conn, Bytes::from_static(b"[")).unwrap();
        ctx.send(conn, data).unwrap();
        ctx.send(conn, Bytes::from_static(b"]")).unwrap();
    }

    fn on_layer_error(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, error: LayerError) {
        self.events.send(format!("error {error}")).unwrap();
        ctx.close(conn);
    }

    fn on_read_closed(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId) {
        self.events.send("end".into()).unwrap();
        ctx.close(conn);
    }
}

fn start() -> Option<(ring_runtime::RuntimeHandle<()>, mpsc::Receiver<String>)> {
    let (tx, rx) = mpsc::channel();
    let handle = common::start(common::config(1), move |_| LayeredEcho {
        events: tx.clone(),
    })?;
    Some((handle, rx))
}

fn next(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(common::HANG).expect("event")
}

fn xor(data: &[u8]) -> Vec<u8> {
    data.iter().map(|b| b ^ KEY).collect()
}

#[test]
fn a_layer_transforms_both_directions_and_encodes_a_turn_at_once() {
    let Some((handle, rx)) = start() else {
        return;
    };
    let addr = handle.local_addrs()[0];
    let mut stream = common::client(addr);
    assert_eq!(next(&rx), format!("local {}", addr.port()));
    // The greeting arrives in two pieces; the data right behind it.
    common::write_all(&mut stream, b"H");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut rest = b"I\n".to_vec();
    rest.extend(xor(b"ping"));
    common::write_all(&mut stream, &rest);
    assert_eq!(common::read_exact(&mut stream, 3), b"OK\n");
    assert_eq!(common::read_exact(&mut stream, 6), xor(b"[ping]"));
    common::write_all(&mut stream, &xor(b"count"));
    // Three frames of one turn went through one `send`.
    assert_eq!(next(&rx), "sends 1");
    common::write_all(&mut stream, &[0]);
    assert_eq!(next(&rx), "end");
    assert_eq!(common::read_to_end(&mut stream), b"BYE");
}

#[test]
fn a_layer_error_reaches_the_handler_after_the_layer_reply() {
    let Some((handle, rx)) = start() else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    next(&rx);
    common::write_all(&mut stream, b"GET / HTTP/1.1\r\n");
    assert_eq!(next(&rx), "error bad greeting");
    assert_eq!(common::read_to_end(&mut stream), b"NO\nBYE");
}

/// Answers every read with `BIG` bytes through the layer.
struct BigAnswers;

const BIG: usize = 1024 * 1024;

impl Handler for BigAnswers {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, _peer: SocketAddr) {
        ctx.set_layer(conn, Box::new(XorLayer::default()));
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        for _ in 0..data.len() {
            ctx.send(conn, Bytes::from(vec![b'x'; BIG])).unwrap();
        }
    }
}

#[test]
fn frames_queued_while_a_layered_write_is_in_flight_follow_it() {
    let Some(handle) = common::start(common::config(1), |_| BigAnswers) else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    common::write_all(&mut stream, GREETING);
    assert_eq!(common::read_exact(&mut stream, 3), b"OK\n");
    // The client does not read while it asks: the first answers fill the socket buffers, the
    // later ones are queued while a write is in flight.
    let asks = 16;
    for _ in 0..asks {
        common::write_all(&mut stream, &xor(b"?"));
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let answer = common::read_exact(&mut stream, asks * BIG);
    assert!(answer.iter().all(|&b| b == b'x' ^ KEY));
}

/// Reads a `FROM <port>\n` line before setting the layer (as a PROXY protocol header comes
/// before TLS): names the peer, then passes what followed the line through the new layer.
#[derive(Default)]
struct LayerAfterLine {
    line: Vec<u8>,
    events: Option<mpsc::Sender<String>>,
}

impl Handler for LayerAfterLine {
    type Message = ();

    fn on_accept(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {}

    fn on_data(&mut self, ctx: &mut ShardCtx<()>, conn: ConnId, data: Bytes) {
        if ctx.layer_mut::<XorLayer>(conn).is_some() {
            let peer = ctx.peer_addr(conn).unwrap();
            self.events
                .as_ref()
                .unwrap()
                .send(format!("{peer}"))
                .unwrap();
            ctx.send(conn, data).unwrap();
            return;
        }
        self.line.extend_from_slice(&data);
        let Some(end) = self.line.iter().position(|&b| b == b'\n') else {
            return;
        };
        let port: u16 = std::str::from_utf8(&self.line[5..end])
            .unwrap()
            .parse()
            .unwrap();
        ctx.set_peer_addr(conn, SocketAddr::from(([192, 0, 2, 7], port)));
        ctx.set_layer(conn, Box::new(XorLayer::default()));
        let rest = Bytes::copy_from_slice(&self.line[end + 1..]);
        ctx.receive_through_layer(conn, rest);
    }
}

#[test]
fn bytes_read_before_a_layer_was_set_go_through_it() {
    let (tx, rx) = mpsc::channel();
    let start = common::start(common::config(1), move |_| LayerAfterLine {
        events: Some(tx.clone()),
        ..LayerAfterLine::default()
    });
    let Some(handle) = start else {
        return;
    };
    let mut stream = common::client(handle.local_addrs()[0]);
    // The line, the layer's greeting and data in one write.
    let mut wire = b"FROM 51000\nHI\n".to_vec();
    wire.extend(xor(b"ping"));
    common::write_all(&mut stream, &wire);
    assert_eq!(common::read_exact(&mut stream, 3), b"OK\n");
    assert_eq!(common::read_exact(&mut stream, 4), xor(b"ping"));
    assert_eq!(next(&rx), "192.0.2.7:51000");
}
