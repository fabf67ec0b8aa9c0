//! Codec microbenchmarks: RingMQ against mqttbytes in the same run.
//!
//! PUBLISH decode and encode with 16 B, 256 B and 4 KiB payloads, for 3.1.1 (no properties)
//! and 5.0 (four properties), and CONNECT decode. Before the timings, a counting allocator
//! reports allocations per operation for every decode case.
//!
//! `cargo bench -p ringmq-benches --bench codec -- --warm-up-time 1 --measurement-time 3`

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use codec::{Limits, Packet, PayloadFormat, ProtocolVersion, PublishProperties, QoS};
use criterion::{BenchmarkId, Criterion};
use mqttbytes::{v4, v5};

struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to the system allocator with the caller's arguments
// unchanged, so `System`'s guarantees hold; counting is a relaxed atomic increment.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const SIZES: [usize; 3] = [16, 256, 4096];
const TOPIC: &str = "sensors/building-7/floor-3/temperature";
/// Frames per pre-built buffer: decode timings include splitting frames off a shared buffer.
const BATCH: usize = 256;
const MAX: usize = 1 << 20;

fn v5_properties() -> PublishProperties {
    let text = |s: &'static str| codec::MqttStr::from_static(s).expect("valid");
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
}

fn ours_publish(protocol: ProtocolVersion, size: usize) -> Packet {
    Packet::Publish(codec::Publish {
        dup: false,
        qos: QoS::AtLeastOnce,
        retain: false,
        content: codec::TopicPayload::new(
            codec::MqttStr::from_static(TOPIC).expect("valid"),
            Bytes::from(vec![b'7'; size]),
        ),
        packet_id: codec::PacketId::new(42),
        properties: if protocol.is_v5() {
            v5_properties().into()
        } else {
            Default::default()
        },
    })
}

fn theirs_v4(size: usize) -> v4::Publish {
    let mut publish = v4::Publish::new(TOPIC, mqttbytes::QoS::AtLeastOnce, vec![b'7'; size]);
    publish.pkid = 42;
    publish
}

fn theirs_v5(size: usize) -> v5::Publish {
    let mut publish = v5::Publish::new(TOPIC, mqttbytes::QoS::AtLeastOnce, vec![b'7'; size]);
    publish.pkid = 42;
    publish.properties = Some(v5::PublishProperties {
        payload_format_indicator: Some(1),
        message_expiry_interval: Some(3600),
        topic_alias: None,
        response_topic: None,
        correlation_data: None,
        user_properties: vec![("trace-id".into(), "4bf92f3577b34da6".into())],
        subscription_identifiers: Vec::new(),
        content_type: Some("application/json".into()),
    });
    publish
}

fn wire(packet: &Packet, protocol: ProtocolVersion) -> BytesMut {
    let mut buf = BytesMut::new();
    codec::encode(packet, protocol, &mut buf).expect("valid packet");
    buf
}

fn connect_wire(protocol: ProtocolVersion) -> BytesMut {
    let text = |s: &'static str| codec::MqttStr::from_static(s).expect("valid");
    let mut properties = codec::ConnectProperties::default();
    if protocol.is_v5() {
        properties.session_expiry_interval = Some(3600);
        properties.receive_maximum = std::num::NonZeroU16::new(100);
    }
    let connect = codec::Connect {
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
    };
    wire(&Packet::from(connect), protocol)
}

/// A decoder under test: takes one packet off the buffer.
type Decoder = fn(&mut BytesMut);

fn ours_v311(buf: &mut BytesMut) {
    let limits = Limits::new(ProtocolVersion::V3_1_1);
    black_box(
        codec::decode(buf, &limits)
            .expect("valid")
            .expect("complete"),
    );
}

fn ours_v5(buf: &mut BytesMut) {
    let limits = Limits::new(ProtocolVersion::V5);
    black_box(
        codec::decode(buf, &limits)
            .expect("valid")
            .expect("complete"),
    );
}

fn mqttbytes_v4(buf: &mut BytesMut) {
    black_box(v4::read(buf, MAX).expect("valid"));
}

fn mqttbytes_v5(buf: &mut BytesMut) {
    black_box(v5::read(buf, MAX).expect("valid"));
}

fn batch(frame: &[u8]) -> BytesMut {
    let mut buf = BytesMut::with_capacity(frame.len() * BATCH);
    for _ in 0..BATCH {
        buf.extend_from_slice(frame);
    }
    buf
}

/// Times `decoder` over `iters` frames, building the buffers outside the timed region.
fn time_decode(frame: &[u8], decoder: Decoder, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCH as u64);
        let mut buf = batch(frame);
        let start = Instant::now();
        for _ in 0..n {
            decoder(&mut buf);
        }
        total += start.elapsed();
        left -= n;
    }
    total
}

/// Allocations per decoded frame, over one batch (buffer construction excluded).
fn allocations_per_decode(frame: &[u8], decoder: Decoder) -> f64 {
    let mut buf = batch(frame);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..BATCH {
        decoder(&mut buf);
    }
    (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / BATCH as f64
}

/// Every decode case: name, frame, RingMQ decoder, mqttbytes decoder.
fn decode_cases() -> Vec<(String, BytesMut, Decoder, Decoder)> {
    let mut cases = Vec::new();
    for size in SIZES {
        let v311 = wire(
            &ours_publish(ProtocolVersion::V3_1_1, size),
            ProtocolVersion::V3_1_1,
        );
        cases.push((
            format!("publish_v311/{size}"),
            v311,
            ours_v311 as Decoder,
            mqttbytes_v4 as Decoder,
        ));
        let v5 = wire(
            &ours_publish(ProtocolVersion::V5, size),
            ProtocolVersion::V5,
        );
        cases.push((
            format!("publish_v5_props/{size}"),
            v5,
            ours_v5,
            mqttbytes_v5,
        ));
    }
    cases.push((
        "connect_v311".into(),
        connect_wire(ProtocolVersion::V3_1_1),
        ours_v311,
        mqttbytes_v4,
    ));
    cases.push((
        "connect_v5".into(),
        connect_wire(ProtocolVersion::V5),
        ours_v5,
        mqttbytes_v5,
    ));
    cases
}

fn report_allocations() {
    println!("allocations per decode (RingMQ / mqttbytes, one batch of {BATCH} frames):");
    for (name, frame, ours, theirs) in decode_cases() {
        let (a, b) = (
            allocations_per_decode(&frame, ours),
            allocations_per_decode(&frame, theirs),
        );
        println!("  {name:<24} {a:>6.2} / {b:>6.2}");
    }
}

/// Rounds of the interleaved comparison.
const ROUNDS: usize = 41;

/// Nanoseconds per frame of one batch.
fn batch_ns(frame: &[u8], decoder: Decoder) -> f64 {
    time_decode(frame, decoder, BATCH as u64).as_nanos() as f64 / BATCH as f64
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// RingMQ and mqttbytes timed in alternating batches, so that a load change on a shared
/// machine hits both alike: the median of the per-round ratios, and each side's best round.
fn report_interleaved() {
    println!("interleaved decode, {ROUNDS} rounds of {BATCH} frames each side:");
    println!(
        "  {:<24} {:>12} {:>12} {:>8}",
        "case", "ringmq ns", "mqttbytes ns", "ratio"
    );
    for (name, frame, ours, theirs) in decode_cases() {
        let (mut ratios, mut best_ours, mut best_theirs) = (Vec::new(), f64::MAX, f64::MAX);
        for round in 0..ROUNDS {
            let (a, b) = if round % 2 == 0 {
                let a = batch_ns(&frame, ours);
                (a, batch_ns(&frame, theirs))
            } else {
                let b = batch_ns(&frame, theirs);
                (batch_ns(&frame, ours), b)
            };
            ratios.push(b / a);
            best_ours = best_ours.min(a);
            best_theirs = best_theirs.min(b);
        }
        let ratio = median(&mut ratios);
        println!("  {name:<24} {best_ours:>12.1} {best_theirs:>12.1} {ratio:>7.2}x");
    }
}

fn bench_decode(c: &mut Criterion) {
    for (name, frame, ours, theirs) in decode_cases() {
        let mut group = c.benchmark_group(format!("decode/{name}"));
        group.bench_function("ringmq", |b| {
            b.iter_custom(|n| time_decode(&frame, ours, n))
        });
        group.bench_function("mqttbytes", |b| {
            b.iter_custom(|n| time_decode(&frame, theirs, n))
        });
        group.finish();
    }
}

fn bench_encode(c: &mut Criterion) {
    for size in SIZES {
        let mut group = c.benchmark_group("encode");
        let mut buf = BytesMut::with_capacity(2 * size + 256);
        for (label, protocol) in [
            ("v311", ProtocolVersion::V3_1_1),
            ("v5_props", ProtocolVersion::V5),
        ] {
            let packet = ours_publish(protocol, size);
            let id = BenchmarkId::new(format!("publish_{label}/ringmq"), size);
            group.bench_function(id, |b| {
                b.iter(|| {
                    buf.clear();
                    codec::encode(black_box(&packet), protocol, &mut buf).expect("valid");
                })
            });
        }
        let (p4, p5) = (theirs_v4(size), theirs_v5(size));
        group.bench_function(BenchmarkId::new("publish_v311/mqttbytes", size), |b| {
            b.iter(|| {
                buf.clear();
                black_box(&p4).write(&mut buf).expect("valid");
            })
        });
        group.bench_function(BenchmarkId::new("publish_v5_props/mqttbytes", size), |b| {
            b.iter(|| {
                buf.clear();
                black_box(&p5).write(&mut buf).expect("valid");
            })
        });
        group.finish();
    }
}

/// Per-subscriber frames of one shared message (RingMQ only: mqttbytes has no equivalent).
fn bench_shared_frame(c: &mut Criterion) {
    let Packet::Publish(publish) = ours_publish(ProtocolVersion::V5, 4096) else {
        unreachable!("ours_publish builds a PUBLISH");
    };
    let shared = codec::SharedPublish::from_publish(&publish).expect("valid");
    let ids = [codec::SubscriptionId::new(7).expect("valid")];
    let options = codec::FrameOptions {
        qos: QoS::AtLeastOnce,
        packet_id: codec::PacketId::new(9),
        subscription_identifiers: &ids,
        ..codec::FrameOptions::new(ProtocolVersion::V5)
    };
    let mut scratch = BytesMut::with_capacity(64 * 1024);
    c.bench_function("shared_publish_frame/v5_props/4096", |b| {
        b.iter(|| {
            if scratch.capacity() < 128 {
                scratch.reserve(64 * 1024);
            }
            black_box(
                shared
                    .frame(black_box(&options), &mut scratch)
                    .expect("valid"),
            );
        })
    });
    // The batched form: headers appended to one write buffer, one payload reference each.
    let mut out = BytesMut::with_capacity(64 * 1024);
    c.bench_function("shared_publish_write_header/v5_props/4096", |b| {
        b.iter(|| {
            if out.len() > 60 * 1024 {
                out.clear();
            }
            shared
                .write_header(black_box(&options), &mut out)
                .expect("valid");
            black_box(shared.payload().clone());
        })
    });
}

fn main() {
    // `cargo bench` passes --bench; `cargo test` runs every benchmark once, without the reports.
    if std::env::args().any(|arg| arg == "--bench") {
        report_allocations();
        report_interleaved();
    }
    let mut criterion = Criterion::default().configure_from_args();
    bench_decode(&mut criterion);
    bench_encode(&mut criterion);
    bench_shared_frame(&mut criterion);
    criterion.final_summary();
}
