//! Memory a WebSocket client holds before a complete MQTT packet (issue 47, defect 2): the
//! fragments of a message are MQTT bytes as they arrive, counted with the partial packets in
//! `limits.max_partial_frame_bytes`, before login as after; a message over the largest size
//! is refused with close 1009 from the header that takes it over; fragmented sessions work.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use codec::{Packet, QoS};
use tungstenite::Message;
use tungstenite::client::IntoClientRequest;
use tungstenite::protocol::frame::coding::CloseCode;

use crate::client::{RawClient, V5, connect_packet, publish_packet};
use crate::harness::{TestBroker, wait_until};
use crate::pki::TestPki;
use crate::process::BrokerProcess;

const WS: &str = "[[listeners.ws]]\nbind = \"127.0.0.1:0\"\npath = \"/mqtt\"\n";

/// Frame opcodes.
const CONTINUATION: u8 = 0x0;
const BINARY: u8 = 0x2;
const PING: u8 = 0x9;

/// Upgrades `stream` at `/mqtt` (subprotocol `mqtt`).
fn upgrade<S: Read + Write>(addr: SocketAddr, stream: S) -> tungstenite::WebSocket<S> {
    let mut request = format!("ws://{addr}/mqtt").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", "mqtt".parse().unwrap());
    tungstenite::client(request, stream)
        .map(|(socket, _)| socket)
        .unwrap_or_else(|e| panic!("upgrade at {addr}: {e}"))
}

fn tcp(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

fn ws_client(addr: SocketAddr) -> tungstenite::WebSocket<TcpStream> {
    upgrade(addr, tcp(addr))
}

type TlsStream = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A secure WebSocket client trusting `pki`'s CA.
fn wss_client(pki: &TestPki, addr: SocketAddr) -> tungstenite::WebSocket<TlsStream> {
    upgrade(addr, crate::pki::tls_client_stream(pki, tcp(addr)))
}

/// A masked client frame (the mask is fixed: the broker must unmask whatever it is).
fn client_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = client_header(fin, opcode, payload.len() as u64);
    frame.extend(
        payload
            .iter()
            .zip([1u8, 2, 3, 4].iter().cycle())
            .map(|(b, k)| b ^ k),
    );
    frame
}

/// The header of a masked client frame announcing `len` payload bytes.
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
    header.extend_from_slice(&[1, 2, 3, 4]);
    header
}

fn encoded(packet: &Packet) -> Vec<u8> {
    let mut bytes = bytes::BytesMut::new();
    codec::encode(packet, V5, &mut bytes).unwrap();
    bytes.to_vec()
}

/// The start of a 5.0 CONNECT announcing `announced` remaining bytes (its body never comes).
fn connect_head(announced: usize) -> Vec<u8> {
    let mut head = crate::memory::connect_head(5, announced);
    // The 5.0 CONNECT's property length.
    head.push(0x00);
    head
}

/// Sends a message that never ends before login: a CONNECT announcing `announced` bytes,
/// then continuation fragments of `fragment` zero bytes (never FIN) until `total` bytes went
/// or the broker closed; then reads until the connection ends.
fn endless_fragments<S: Read + Write>(
    socket: &mut tungstenite::WebSocket<S>,
    announced: usize,
    fragment: usize,
    total: usize,
) {
    let stream = socket.get_mut();
    if stream
        .write_all(&client_frame(false, BINARY, &connect_head(announced)))
        .is_err()
    {
        return;
    }
    let body = client_frame(false, CONTINUATION, &vec![0u8; fragment]);
    let mut sent = 0;
    while sent < total {
        if stream
            .write_all(&body)
            .and_then(|()| stream.flush())
            .is_err()
        {
            break;
        }
        sent += fragment;
    }
    // Whatever came back (a CONNACK 0x97, the close frame) ends with the socket's end.
    loop {
        match socket.read() {
            Ok(Message::Close(_)) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The partial CONNECTs announce this much (under `max_packet_size`, 256 KiB).
const ANNOUNCED: usize = 200_000;

/// Limits leaving room for one partial CONNECT of [`ANNOUNCED`] bytes, not two.
const TIGHT_BUDGET: &str = "[limits]\nmax_packet_size = 262144\nmax_connect_size = 262144\n\
                            max_partial_frame_bytes = 300000\n";

/// Before login, one client holds most of the budget in a partial CONNECT over plain TCP;
/// a WebSocket client then sends a CONNECT in fragments that never end. Its bytes count
/// against the same budget: it is closed there and counted.
fn fragments_before_login_count_against_the_budget(config: &str, attack: impl FnOnce(&TestBroker)) {
    let broker = TestBroker::with_config(&format!("{config}{TIGHT_BUDGET}"));
    let mut squatter = RawClient::open(broker.addr(), V5);
    squatter.send_raw(&connect_head(ANNOUNCED));
    squatter.send_raw(&vec![0u8; ANNOUNCED - 1000]);
    attack(&broker);
    broker.wait_for_metrics("the WebSocket client closed over the budget", |m| {
        m.partial_frame_closed >= 1
    });
    squatter.drop_abruptly();
    broker.assert_serving();
}

#[test]
fn endless_websocket_fragments_before_login_are_closed_at_the_partial_frame_budget() {
    fragments_before_login_count_against_the_budget(WS, |broker| {
        let mut socket = ws_client(broker.addr_of("ws"));
        endless_fragments(&mut socket, ANNOUNCED, 16_384, 4 << 20)
    });
}

#[test]
fn endless_secure_websocket_fragments_before_login_are_closed_at_the_partial_frame_budget() {
    let pki = TestPki::new();
    let wss = format!(
        "[[listeners.wss]]\nbind = \"127.0.0.1:0\"\npath = \"/mqtt\"\n{}",
        pki.listener_keys()
    );
    fragments_before_login_count_against_the_budget(&wss, |broker| {
        let mut socket = wss_client(&pki, broker.addr_of("wss"));
        endless_fragments(&mut socket, ANNOUNCED, 16_384, 4 << 20)
    });
}

/// 200 WebSocket clients before login, each sending a CONNECT of 2 MiB in 64 KiB fragments
/// that never end. Without bounds the broker would hold about 400 MiB; with them its RSS, once
/// it has read every byte sent, grows by at most the partial-frame budget and a margin for 200
/// connections' own state and the allocator's slack. Freed memory goes back to the OS at once
/// (`free_memory_hold_ms = 0`), so the RSS shows what is held, not what was.
#[test]
fn many_websocket_fragment_attackers_before_login_stay_within_the_broker_budget() {
    const CLIENTS: usize = 200;
    const EACH: usize = 2 << 20;
    const FRAGMENT: usize = 64 * 1024;
    const BUDGET: u64 = 16 << 20;
    // What is not partial packets: 200 connections' state (runtime record, session, layer and
    // socket bookkeeping: a few KiB each, under 2 MiB), the allocator's segments around the
    // few carries of 2 MiB that fit (each in a segment of its own) and its pages not yet
    // handed back, the shards' receive buffers. Measured: 13 to 15 MiB beyond the budget
    // (29 MiB in all, debug build); 32 MiB leaves room, and the unbounded broker grows by more
    // than ten times budget and margin together.
    const MARGIN: u64 = 32 << 20;
    let dir = tempfile::tempdir().unwrap();
    let ws_port = crate::ports::free_port();
    let config = format!(
        "[runtime]\nshards = 2\n[persistence]\nengine = \"none\"\n\
         [[listeners.ws]]\nbind = \"127.0.0.1:{ws_port}\"\npath = \"/mqtt\"\n\
         [limits]\nmax_packet_size = 4194304\nmax_connect_size = 4194304\n\
         max_partial_frame_bytes = {BUDGET}\nfree_memory_hold_ms = 0\n"
    );
    let mut broker = BrokerProcess::start(&config, &dir.path().join("ringmq.toml"));
    let ws: SocketAddr = ([127, 0, 0, 1], ws_port).into();
    // Serving on its main port, and accepting on the WebSocket one: a CI run once had this
    // test's first WebSocket connection refused (cause not found; a broker that exited, say
    // for a port taken meanwhile, now fails the test saying so).
    broker.wait_serving();
    wait_until("the WebSocket listener accepts", || {
        TcpStream::connect(ws).ok().map(drop)
    });
    let mut sockets: Vec<_> = (0..CLIENTS).map(|_| ws_client(ws)).collect();
    let before = broker.memory("VmRSS");
    let head = client_frame(false, BINARY, &connect_head(EACH));
    let body = client_frame(false, CONTINUATION, &vec![0u8; FRAGMENT]);
    let mut open = vec![true; CLIENTS];
    for (socket, open) in sockets.iter_mut().zip(&mut open) {
        *open = socket.get_mut().write_all(&head).is_ok();
    }
    // Round after round, one fragment each, up to just under 2 MiB (under the old 2 x
    // max_packet_size message bound too).
    for _ in 0..EACH / FRAGMENT - 1 {
        for (socket, open) in sockets.iter_mut().zip(&mut open) {
            *open = *open && socket.get_mut().write_all(&body).is_ok();
        }
    }
    // A ping behind the fragments: its pong means the broker read everything before it.
    let ping = client_frame(true, PING, b"sync");
    for (socket, open) in sockets.iter_mut().zip(&mut open) {
        if *open && socket.get_mut().write_all(&ping).is_ok() {
            while let Ok(message) = socket.read() {
                if matches!(message, Message::Pong(_)) {
                    break;
                }
            }
        }
    }
    let loaded = broker.memory("VmRSS");
    let growth = loaded.saturating_sub(before);
    assert!(
        growth <= BUDGET + MARGIN,
        "RSS grew by {} MiB (from {} MiB), over the {} MiB budget + {} MiB",
        growth >> 20,
        before >> 20,
        BUDGET >> 20,
        MARGIN >> 20
    );
    drop(sockets);
    drop(broker);
}

#[test]
fn a_websocket_message_over_the_largest_size_is_refused_with_1009_before_it_arrives() {
    // Largest message: 2 x max_packet_size = 128 KiB.
    let broker = TestBroker::with_config(&format!("{WS}[limits]\nmax_packet_size = 65536\n"));
    let mut plain = RawClient::connected_clean(broker.addr(), V5, "watcher");
    plain.subscribe("big/+", QoS::AtMostOnce);
    let mut socket = ws_client(broker.addr_of("ws"));
    let connect = encoded(&Packet::Connect(Box::new(connect_packet(V5, "big", true))));
    socket.send(Message::binary(connect)).unwrap();
    assert!(
        matches!(socket.read().unwrap(), Message::Binary(_)),
        "CONNACK"
    );
    // Three fragments of one message, each a whole PUBLISH of 40 KB: within the bound, they
    // are delivered as they arrive.
    for i in 0..3 {
        let publish = publish_packet(&format!("big/{i}"), &[7; 40_000], QoS::AtMostOnce, None);
        let opcode = if i == 0 { BINARY } else { CONTINUATION };
        let fragment = client_frame(false, opcode, &encoded(&Packet::Publish(publish)));
        socket.get_mut().write_all(&fragment).unwrap();
        assert_eq!(plain.expect_publish().payload().len(), 40_000);
    }
    // The fourth fragment's header takes the message to 160 KB: refused with 1009 though only
    // 100 of its bytes are sent.
    let mut header = client_header(false, CONTINUATION, 40_100);
    header.extend(std::iter::repeat_n(0, 100));
    socket.get_mut().write_all(&header).unwrap();
    let close = match socket.read() {
        Ok(Message::Close(frame)) => frame.expect("a close frame with a status"),
        Ok(other) => panic!("expected a close frame, got {other:?}"),
        Err(e) => panic!("expected a close frame, the read failed: {e}"),
    };
    assert_eq!(close.code, CloseCode::Size, "{close:?}");
    broker.assert_serving();
}

#[test]
fn a_fragmented_websocket_mqtt_session_works() {
    let broker = TestBroker::with_config(WS);
    let mut socket = ws_client(broker.addr_of("ws"));
    // The CONNECT in three fragments, a ping between two of them, the header split too.
    let connect = encoded(&Packet::Connect(Box::new(connect_packet(V5, "frag", true))));
    let mut wire = client_frame(false, BINARY, &connect[..1]);
    wire.extend(client_frame(false, CONTINUATION, &connect[1..6]));
    wire.extend(client_frame(true, PING, b"mid"));
    wire.extend(client_frame(true, CONTINUATION, &connect[6..]));
    let (first, second) = wire.split_at(9);
    socket.get_mut().write_all(first).unwrap();
    socket.get_mut().flush().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    socket.get_mut().write_all(second).unwrap();
    let mut pong = false;
    let connack = loop {
        match socket.read().unwrap() {
            Message::Pong(payload) => {
                assert_eq!(&payload[..], b"mid");
                pong = true;
            }
            Message::Binary(connack) => break connack,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(connack[0] >> 4, 2, "CONNACK");
    let mut plain = RawClient::connected_clean(broker.addr(), V5, "plain");
    plain.subscribe("frag/t", QoS::AtLeastOnce);
    // A PUBLISH in four fragments of one message, the second fragment mid-header.
    let publish = encoded(&Packet::Publish(publish_packet(
        "frag/t",
        &[5; 3000],
        QoS::AtMostOnce,
        None,
    )));
    let cuts = [0, 3, 10, 2000, publish.len()];
    for (i, range) in cuts.windows(2).enumerate() {
        let opcode = if i == 0 { BINARY } else { CONTINUATION };
        let fin = range[1] == publish.len();
        let fragment = client_frame(fin, opcode, &publish[range[0]..range[1]]);
        socket.get_mut().write_all(&fragment).unwrap();
    }
    assert_eq!(plain.expect_publish_on("frag/t").payload(), &[5; 3000][..]);
    if !pong {
        let reply = wait_until("the pong", || match socket.read() {
            Ok(Message::Pong(payload)) => Some(payload),
            _ => None,
        });
        assert_eq!(&reply[..], b"mid");
    }
    socket.close(None).unwrap();
}
