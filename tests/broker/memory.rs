//! Memory bounds against abusive clients (issue 11): a CONNECT larger than
//! `limits.max_connect_size` is refused from its fixed header, and the bytes all connections
//! hold in partial packets stay within `limits.max_partial_frame_bytes`.

use bytes::{Bytes, BytesMut};
use codec::{Packet, QoS, ReasonCode};

use crate::client::{Event, READ_TIMEOUT, RawClient, V5, V311, connect_packet, publish_packet};
use crate::harness::{TestBroker, wait_until};

/// The start of a CONNECT (fixed header, protocol name and level, flags, keep-alive) announcing
/// `announced` remaining bytes.
pub(crate) fn connect_head(level: u8, announced: usize) -> Vec<u8> {
    let mut head = vec![0x10];
    let mut n = announced;
    loop {
        let byte = (n & 0x7F) as u8;
        n >>= 7;
        head.push(if n > 0 { byte | 0x80 } else { byte });
        if n == 0 {
            break;
        }
    }
    head.extend_from_slice(&[0x00, 0x04, b'M', b'Q', b'T', b'T', level, 0x02, 0x00, 0x3c]);
    head
}

/// A socket that sends the start of a CONNECT announcing `announced` bytes, then `body` more
/// bytes in two writes.
fn slow_connect(broker: &TestBroker, level: u8, announced: usize, body: usize) -> RawClient {
    let protocol = if level == 5 { V5 } else { V311 };
    let mut socket = RawClient::open(broker.addr(), protocol);
    socket.send_raw(&connect_head(level, announced));
    socket.send_raw(&vec![0u8; body / 2]);
    socket.send_raw(&vec![0u8; body - body / 2]);
    socket
}

#[test]
fn a_connect_announcing_more_than_max_connect_size_is_refused() {
    let broker = TestBroker::start();
    let sockets: Vec<_> = (0..20)
        .map(|i| slow_connect(&broker, if i % 2 == 0 { 5 } else { 4 }, 1_000_000, 4096))
        .collect();
    for mut socket in sockets {
        let before = socket.expect_closed();
        if socket.protocol.is_v5() {
            match before.as_slice() {
                [Packet::ConnAck(connack)] => {
                    assert_eq!(connack.reason_code, ReasonCode::PacketTooLarge)
                }
                other => panic!("expected CONNACK 0x95, got {other:?}"),
            }
        } else {
            assert!(before.is_empty(), "3.1.1: closed without CONNACK");
        }
    }
    // A CONNECT just under the limit (a 60 KB password) is accepted.
    let mut connect = connect_packet(V5, "big-but-allowed", true);
    connect.password = Some(Bytes::from(vec![b'p'; 60_000]));
    RawClient::connected(broker.addr(), connect).disconnect();
    broker.assert_serving();
}

#[test]
fn partial_packets_beyond_the_broker_budget_close_their_connections() {
    const BUDGET: usize = 524_288;
    const BODY: usize = 50_000;
    const SOCKETS: usize = 20;
    let broker = TestBroker::with_config(&format!(
        "[limits]\nmax_packet_size = 262144\nmax_connect_size = 262144\n\
         max_partial_frame_bytes = {BUDGET}\n"
    ));
    let sockets: Vec<_> = (0..SOCKETS)
        .map(|_| slow_connect(&broker, 4, 200_000, BODY))
        .collect();
    // At most BUDGET / BODY partial CONNECTs fit: the others are closed and counted.
    let at_least = (SOCKETS - BUDGET / BODY) as u64;
    broker.wait_for_metrics("connections closed over the partial-frame budget", |m| {
        m.partial_frame_closed >= at_least
    });
    broker.assert_serving();
    for socket in sockets {
        socket.drop_abruptly();
    }
    // Once the abusive sockets are gone their bytes are back in the budget: a 200 KB PUBLISH
    // sent in pieces goes through (retried while the broker is still closing them).
    wait_until("a large PUBLISH to fit in the released budget", || {
        publish_in_pieces(&broker, 200_000)
    });
}

/// Publishes a QoS 1 message of `size` bytes in two writes; `Some` when it is acknowledged,
/// `None` when the broker closed the connection instead.
fn publish_in_pieces(broker: &TestBroker, size: usize) -> Option<()> {
    let mut client = RawClient::connected_clean(broker.addr(), V5, "large-publisher");
    let publish = publish_packet("large", &vec![1u8; size], QoS::AtLeastOnce, Some(1));
    let mut frame = BytesMut::new();
    codec::encode(&Packet::Publish(publish), V5, &mut frame).expect("test packet encodes");
    let (first, second) = frame.split_at(frame.len() / 2);
    client.send_raw(first);
    client.send_raw(second);
    match client.next_event(READ_TIMEOUT) {
        Event::Packet(packet) => match *packet {
            Packet::PubAck(ack) if ack.reason_code.is_error() => None,
            Packet::PubAck(_) => Some(()),
            Packet::Disconnect(d) if d.reason_code == ReasonCode::QuotaExceeded => None,
            other => panic!("expected PUBACK or DISCONNECT 0x97, got {other:?}"),
        },
        Event::Closed => None,
        Event::Timeout => panic!("no answer to a large PUBLISH"),
    }
}
