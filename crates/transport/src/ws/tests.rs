//! The server session's reader: payload streamed to MQTT as it arrives, message bound checked
//! at the header, control frames answered, and what a connection holds charged and bounded.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use ring_runtime::{LayerOutput, LayerState, StreamLayer};

use super::pipe::apply_mask;
use super::{WsEndpoint, WsSession};
use crate::config::AllowedOrigins;
use crate::hold::{HeldOver, HoldLimit, SharedBudget};
use crate::server_layer::MqttTransport;
use crate::stack::WsHalf;

const MAX_MESSAGE: usize = 64 * 1024;

const UPGRADE: &[u8] = b"GET /mqtt HTTP/1.1\r\nHost: broker\r\nUpgrade: websocket\r\n\
Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n";

/// A masked client frame.
fn client_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    client_header(fin, opcode, payload.len() as u64)
        .into_iter()
        .chain(masked(payload))
        .collect()
}

const MASK: [u8; 4] = [0x12, 0x34, 0x56, 0x78];

fn client_header(fin: bool, opcode: u8, len: u64) -> Vec<u8> {
    let mut header = vec![if fin { 0x80 } else { 0 } | opcode];
    match len {
        0..=125 => header.push(0x80 | len as u8),
        126..=0xFFFF => {
            header.push(0x80 | 126);
            header.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            header.push(0x80 | 127);
            header.extend_from_slice(&len.to_be_bytes());
        }
    }
    header.extend_from_slice(&MASK);
    header
}

fn masked(payload: &[u8]) -> Vec<u8> {
    let mut bytes = payload.to_vec();
    apply_mask(&mut bytes, MASK);
    bytes
}

/// Feeds `input`: (result, MQTT bytes, reply).
fn feed(session: &mut WsSession, input: &[u8]) -> (Result<LayerState, String>, Vec<u8>, Vec<u8>) {
    let (mut plain, mut reply) = (BytesMut::new(), BytesMut::new());
    let result = session
        .receive(input, &mut plain, &mut reply)
        .map_err(|e| e.to_string());
    (result, plain.to_vec(), reply.to_vec())
}

/// `/mqtt`, any origin.
fn endpoint() -> WsEndpoint {
    WsEndpoint::new("/mqtt", &AllowedOrigins::default())
}

/// The upgrade request with an `Origin` header.
fn upgrade_from(origin: &str) -> Vec<u8> {
    let end = UPGRADE.len() - 2;
    [
        &UPGRADE[..end],
        format!("Origin: {origin}\r\n\r\n").as_bytes(),
    ]
    .concat()
}

#[test]
fn an_upgrade_from_an_origin_not_listed_is_refused_with_403() {
    let origins = AllowedOrigins::new(vec!["https://Dashboard.example".to_owned()]);
    let endpoint = || WsEndpoint::new("/mqtt", &origins);
    let mut session = WsSession::new(endpoint(), MAX_MESSAGE);
    let (result, _, reply) = feed(&mut session, &upgrade_from("http://evil.example"));
    assert!(result.is_err(), "{result:?}");
    assert!(
        reply.starts_with(b"HTTP/1.1 403"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    for accepted in [upgrade_from("https://dashboard.example"), UPGRADE.to_vec()] {
        let mut session = WsSession::new(endpoint(), MAX_MESSAGE);
        let (result, _, reply) = feed(&mut session, &accepted);
        assert_eq!(result, Ok(LayerState::Open));
        assert!(reply.starts_with(b"HTTP/1.1 101"), "{reply:?}");
    }
}

fn upgraded() -> WsSession {
    let mut session = WsSession::new(endpoint(), MAX_MESSAGE);
    let (result, plain, reply) = feed(&mut session, UPGRADE);
    assert_eq!(result, Ok(LayerState::Open));
    assert!(plain.is_empty());
    assert!(reply.starts_with(b"HTTP/1.1 101"), "{reply:?}");
    session
}

/// The status code of the close frame `reply` holds.
fn close_code(reply: &[u8]) -> u16 {
    assert_eq!(reply[0], 0x88, "a close frame: {reply:?}");
    u16::from_be_bytes([reply[2], reply[3]])
}

#[test]
fn fragments_reach_mqtt_as_they_arrive_and_nothing_is_held() {
    let mut session = upgraded();
    let first = client_frame(false, 0x2, &[1; 1000]);
    // Half a fragment: its payload so far is passed on at once.
    let (result, plain, _) = feed(&mut session, &first[..500]);
    assert_eq!(result, Ok(LayerState::Open));
    assert_eq!(plain.len(), 500 - 8);
    assert!(plain.iter().all(|&b| b == 1));
    assert_eq!(session.held(), 0);
    let (_, plain, _) = feed(&mut session, &first[500..]);
    assert_eq!(plain.len(), 1000 - 492);
    // Continuations, the header split over two reads.
    for _ in 0..20 {
        let next = client_frame(false, 0x0, &[2; 1000]);
        let (_, plain, _) = feed(&mut session, &next[..3]);
        assert!(plain.is_empty());
        assert!(session.held() <= 14, "a partial header: {}", session.held());
        let (result, plain, _) = feed(&mut session, &next[3..]);
        assert_eq!(result, Ok(LayerState::Open));
        assert_eq!(plain, vec![2; 1000]);
        assert_eq!(session.held(), 0);
    }
    let (result, plain, _) = feed(&mut session, &client_frame(true, 0x0, b"end"));
    assert_eq!((result, plain), (Ok(LayerState::Open), b"end".to_vec()));
}

#[test]
fn a_message_announcing_more_than_the_bound_is_refused_at_its_header() {
    let mut session = upgraded();
    let first = client_frame(false, 0x2, &[0; 40_000]);
    assert_eq!(feed(&mut session, &first).0, Ok(LayerState::Open));
    // The second fragment's header takes the message to 80,000 bytes: refused before its
    // payload.
    let (result, plain, reply) = feed(&mut session, &client_header(false, 0x0, 40_000));
    assert!(result.unwrap_err().contains("65536"));
    assert!(plain.is_empty());
    assert_eq!(close_code(&reply), 1009);
    // A single frame announcing too much, on a fresh session.
    let mut session = upgraded();
    let (result, _, reply) = feed(&mut session, &client_header(true, 0x2, 1 << 40));
    assert!(result.is_err());
    assert_eq!(close_code(&reply), 1009);
    // The bound is per message: messages within it follow each other.
    let mut session = upgraded();
    for _ in 0..4 {
        let message = client_frame(true, 0x2, &[0; 40_000]);
        assert_eq!(feed(&mut session, &message).0, Ok(LayerState::Open));
    }
}

#[test]
fn control_frames_are_answered_and_bad_frames_refused() {
    let mut session = upgraded();
    // A ping between two fragments, split over reads.
    let mut input = client_frame(false, 0x2, b"ab");
    input.extend(client_frame(true, 0x9, b"hi"));
    input.extend(client_frame(true, 0x0, b"cd"));
    let (first, second) = input.split_at(10);
    let (_, plain_a, reply_a) = feed(&mut session, first);
    let (result, plain_b, reply_b) = feed(&mut session, second);
    assert_eq!(result, Ok(LayerState::Open));
    assert_eq!([plain_a, plain_b].concat(), b"abcd");
    assert_eq!([reply_a, reply_b].concat(), vec![0x8A, 2, b'h', b'i']);
    // A close is echoed with its code.
    let (result, _, reply) = feed(
        &mut session,
        &client_frame(true, 0x8, &1000u16.to_be_bytes()),
    );
    assert_eq!(result, Ok(LayerState::PeerClosed));
    assert_eq!(close_code(&reply), 1000);
    for (frame, code) in [
        (client_frame(true, 0x1, b"text"), 1003),
        (client_frame(true, 0x0, b"no message"), 1002),
        (client_frame(false, 0x9, b"fragmented ping"), 1002),
        (client_frame(true, 0x2, b"x")[..2].to_vec(), 0),
        ([0x82, 0x01, b'x'].to_vec(), 1002),
    ] {
        let mut session = upgraded();
        let (result, _, reply) = feed(&mut session, &frame);
        if code == 0 {
            assert_eq!(result, Ok(LayerState::Open), "a partial header waits");
        } else {
            assert!(result.is_err(), "{frame:?}");
            assert_eq!(close_code(&reply), code, "{frame:?}");
        }
    }
}

#[test]
fn frames_behind_the_upgrade_request_are_read() {
    let mut session = WsSession::new(endpoint(), MAX_MESSAGE);
    let mut input = UPGRADE.to_vec();
    input.extend(client_frame(true, 0x2, b"mqtt bytes"));
    // Split inside the blank line ending the request.
    let at = UPGRADE.len() - 2;
    let (result, plain, _) = feed(&mut session, &input[..at]);
    assert_eq!((result, plain), (Ok(LayerState::Open), Vec::new()));
    assert_eq!(session.held(), at);
    let (result, plain, reply) = feed(&mut session, &input[at..]);
    assert_eq!(result, Ok(LayerState::Open));
    assert!(reply.starts_with(b"HTTP/1.1 101"));
    assert_eq!(plain, b"mqtt bytes");
    assert_eq!(session.held(), 0);
}

/// A shared budget counting what is charged.
struct Counted {
    limit: u64,
    used: AtomicU64,
}

impl SharedBudget for Counted {
    fn try_charge(&self, bytes: u64) -> bool {
        let before = self.used.fetch_add(bytes, Ordering::Relaxed);
        if before + bytes > self.limit {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn release(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

fn ws_layer(budget: &Arc<Counted>) -> MqttTransport {
    let peer: SocketAddr = ([127, 0, 0, 1], 1).into();
    let shared: Arc<dyn SharedBudget> = Arc::clone(budget) as _;
    let limit = HoldLimit::new(0, shared);
    let ws = WsSession::new(endpoint(), MAX_MESSAGE);
    MqttTransport::server(None, Some(ws), peer, false, Some(&limit))
}

#[test]
fn what_the_layer_holds_is_charged_and_given_back() {
    let budget = Arc::new(Counted {
        limit: 200,
        used: AtomicU64::new(0),
    });
    let mut layer = ws_layer(&budget);
    let mut out = LayerOutput::default();
    // 150 bytes of an upgrade request are held and charged.
    layer
        .receive(Bytes::from_static(&UPGRADE[..150]), &mut out)
        .unwrap();
    assert_eq!(budget.used.load(Ordering::Relaxed), 150);
    layer
        .receive(Bytes::from_static(&UPGRADE[150..]), &mut out)
        .unwrap();
    assert_eq!(
        budget.used.load(Ordering::Relaxed),
        0,
        "upgraded: nothing held"
    );
    assert_eq!(layer.held_over(), None);
    // A second connection's request no longer fits once the first holds 150 bytes again.
    let mut first = ws_layer(&budget);
    first
        .receive(Bytes::from_static(&UPGRADE[..150]), &mut out)
        .unwrap();
    let mut second = ws_layer(&budget);
    assert!(
        second
            .receive(Bytes::from_static(&UPGRADE[..100]), &mut out)
            .is_err()
    );
    assert_eq!(second.held_over(), Some(HeldOver::Shared { held: 100 }));
    drop(first);
    assert_eq!(
        budget.used.load(Ordering::Relaxed),
        0,
        "given back when dropped"
    );
}
