use super::*;
use codec::{Packet, QoS};
use router::TopicLimits;

fn spec(target: TraceTarget) -> TraceSpec {
    TraceSpec {
        target,
        duration: Duration::from_secs(60),
        max_bytes: 64,
        payload_bytes: 0,
    }
}

#[test]
fn a_trace_follows_its_target_and_keeps_its_log_bounded() {
    let traces = Traces::new(TraceLimits::default());
    let now = Instant::now();
    let id = traces
        .start(spec(TraceTarget::ClientId("a".into())), now)
        .unwrap();
    let a = Identity {
        client_id: Some("a"),
        username: None,
        address: None,
    };
    let b = Identity {
        client_id: Some("b"),
        ..a
    };
    assert_eq!(traces.following(a, now).len(), 1);
    assert!(traces.following(b, now).is_empty());
    let trace = traces.get(id).unwrap();
    trace.write(&"x".repeat(40));
    trace.write(&"y".repeat(40));
    let view = trace.view(now);
    assert_eq!((view.lines, view.dropped_lines, view.bytes), (2, 1, 41));
    let (text, next) = trace.read(0);
    assert_eq!((text.len(), next), (41, 41));
    assert_eq!(trace.read(next).0, "");
}

#[test]
fn topic_traces_are_counted_and_end_with_their_time_or_a_stop() {
    let traces = Traces::new(TraceLimits::default());
    let now = Instant::now();
    let filter = TopicFilter::new("a/#", &TopicLimits::default()).unwrap();
    let id = traces.start(spec(TraceTarget::Topic(filter)), now).unwrap();
    assert!(traces.topic_traces());
    assert_eq!(traces.on_topic("a/b", now).len(), 1);
    assert!(traces.on_topic("b", now).is_empty());
    let generation = traces.generation();
    traces.expire(now + Duration::from_secs(61));
    assert!(!traces.topic_traces(), "past its time");
    assert!(traces.generation() > generation);
    assert!(traces.stop(id, now));
    assert!(!traces.get(id).unwrap().running(now));
}

#[test]
fn requests_beyond_the_limits_are_refused() {
    let limits = TraceLimits {
        max_traces: 1,
        max_bytes: 100,
        max_duration: Duration::from_secs(10),
    };
    let traces = Traces::new(limits);
    let now = Instant::now();
    let mut big = spec(TraceTarget::Username("u".into()));
    big.max_bytes = 101;
    assert!(matches!(
        traces.start(big, now),
        Err(TraceRefused::TooLarge { .. })
    ));
    let mut long = spec(TraceTarget::Username("u".into()));
    long.duration = Duration::from_secs(11);
    long.max_bytes = 10;
    assert!(matches!(
        traces.start(long, now),
        Err(TraceRefused::TooLong { .. })
    ));
    let mut ok = spec(TraceTarget::Username("u".into()));
    ok.duration = Duration::from_secs(5);
    let first = traces.start(ok.clone(), now).unwrap();
    assert_eq!(traces.start(ok.clone(), now), Err(TraceRefused::TooMany(1)));
    let later = now + Duration::from_secs(6);
    let second = traces.start(ok, later).unwrap();
    assert!(traces.get(first).is_none(), "a finished trace makes room");
    assert!(traces.get(second).is_some());
}

#[test]
fn lines_show_the_packet_and_never_the_password() {
    let connect = codec::Connect {
        protocol: codec::ProtocolVersion::V5,
        clean_start: true,
        keep_alive: 30,
        client_id: codec::MqttStr::try_from("c1").unwrap(),
        will: None,
        username: Some(codec::MqttStr::try_from("user").unwrap()),
        password: Some(bytes::Bytes::from_static(b"secret")),
        properties: codec::ConnectProperties::default(),
    };
    let line = packet_line(Direction::In, "c1", &Packet::from(connect), 0);
    assert!(
        line.contains("CONNECT client_id=c1") && line.contains("username=user"),
        "{line}"
    );
    assert!(!line.contains("secret"));
    let publish = PacketLine {
        topic: "a/b",
        qos: QoS::AtLeastOnce,
        packet_id: Some(7),
        dup: false,
        retain: true,
        payload: b"hello",
    };
    let line = publish_line(Direction::Out, "c1", publish, None, 2);
    assert!(
        line.ends_with("out c1 PUBLISH id=7 topic=a/b qos=1 dup=0 retain=1 payload=5B first=6865"),
        "{line}"
    );
}
