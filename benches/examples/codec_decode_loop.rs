//! A driver for instruction counts: decodes one frame `N` times with RingMQ or mqttbytes, for
//! `valgrind --tool=callgrind` (deterministic, unlike timings on a shared machine).
//!
//! `cargo build --release -p ringmq-benches --example codec_decode_loop`, then
//! `valgrind --tool=callgrind --toggle-collect='*decode_all*' \
//! target/release/examples/codec_decode_loop <case> <ringmq|mqttbytes> [N]`
//! with case one of `publish_v311`, `publish_v5_props`, `connect_v311`, `connect_v5`.

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use codec::{Limits, Packet, PayloadFormat, ProtocolVersion, PublishProperties, QoS};
use mqttbytes::{v4, v5};

const TOPIC: &str = "sensors/building-7/floor-3/temperature";
const MAX: usize = 1 << 20;

fn text(s: &'static str) -> codec::MqttStr {
    codec::MqttStr::from_static(s).expect("valid")
}

fn publish(protocol: ProtocolVersion) -> Packet {
    let properties = if protocol.is_v5() {
        PublishProperties {
            payload_format: Some(PayloadFormat::Utf8),
            message_expiry_interval: Some(3600),
            application: codec::AppProperties::builder()
                .content_type(Some(text("application/json")))
                .user_property(text("trace-id"), text("4bf92f3577b34da6"))
                .build()
                .expect("valid"),
            ..PublishProperties::default()
        }
        .into()
    } else {
        Default::default()
    };
    Packet::Publish(codec::Publish {
        dup: false,
        qos: QoS::AtLeastOnce,
        retain: false,
        content: codec::TopicPayload::new(text(TOPIC), Bytes::from(vec![b'7'; 256])),
        packet_id: codec::PacketId::new(42),
        properties,
    })
}

fn connect(protocol: ProtocolVersion) -> Packet {
    let mut properties = codec::ConnectProperties::default();
    if protocol.is_v5() {
        properties.session_expiry_interval = Some(3600);
        properties.receive_maximum = std::num::NonZeroU16::new(100);
    }
    Packet::from(codec::Connect {
        protocol,
        clean_start: true,
        keep_alive: 60,
        client_id: text("bench-client-0001"),
        will: Some(codec::Will {
            topic: text("clients/bench-client-0001/status"),
            payload: Bytes::from_static(b"offline"),
            qos: QoS::AtLeastOnce,
            retain: true,
            properties: Default::default(),
        }),
        username: Some(text("user")),
        password: Some(Bytes::from_static(b"secret")),
        properties,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (case, side) = (args.get(1).expect("case"), args.get(2).expect("side"));
    let n: usize = args.get(3).map_or(10_000, |s| s.parse().expect("count"));
    let (packet, protocol) = match case.as_str() {
        "publish_v311" => (publish(ProtocolVersion::V3_1_1), ProtocolVersion::V3_1_1),
        "publish_v5_props" => (publish(ProtocolVersion::V5), ProtocolVersion::V5),
        "connect_v311" => (connect(ProtocolVersion::V3_1_1), ProtocolVersion::V3_1_1),
        "connect_v5" => (connect(ProtocolVersion::V5), ProtocolVersion::V5),
        other => panic!("unknown case {other}"),
    };
    let mut frame = BytesMut::new();
    codec::encode(&packet, protocol, &mut frame).expect("valid");
    let mut buf = BytesMut::with_capacity(frame.len() * n);
    for _ in 0..n {
        buf.extend_from_slice(&frame);
    }
    decode_all(&mut buf, side, protocol, n);
    assert!(buf.is_empty(), "every frame decoded");
}

/// The measured part (`--toggle-collect=*decode_all*` counts only this): `n` decodes, each
/// result dropped.
#[inline(never)]
fn decode_all(buf: &mut BytesMut, side: &str, protocol: ProtocolVersion, n: usize) {
    let limits = Limits::new(protocol);
    for _ in 0..n {
        match (side, protocol.is_v5()) {
            ("ringmq", _) => drop(black_box(codec::decode(buf, &limits))),
            (_, false) => drop(black_box(v4::read(buf, MAX))),
            (_, true) => drop(black_box(v5::read(buf, MAX))),
        }
    }
}
