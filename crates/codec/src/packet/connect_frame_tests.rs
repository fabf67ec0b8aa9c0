use bytes::BytesMut;

use super::*;
use crate::{Limits, Packet, decode, encode};

fn text(s: &'static str) -> MqttStr {
    MqttStr::from_static(s).unwrap()
}

fn sent(protocol: ProtocolVersion) -> Connect {
    let mut will_properties = WillProperties::default();
    if protocol.is_v5() {
        will_properties.content_type = Some(text("text/plain"));
    }
    Connect {
        protocol,
        clean_start: true,
        keep_alive: 30,
        client_id: text("sensor-17"),
        will: Some(Will {
            topic: text("status/sensor-17"),
            payload: Bytes::from_static(b"gone"),
            qos: QoS::AtLeastOnce,
            retain: true,
            properties: will_properties,
        }),
        username: Some(text("alice")),
        password: Some(Bytes::from_static(b"secret")),
        properties: ConnectProperties::default(),
    }
}

/// `connect` encoded, then decoded as a server does.
fn received(connect: &Connect) -> (Box<ConnectFrame>, BytesMut) {
    let mut wire = BytesMut::new();
    encode(&Packet::from(connect.clone()), connect.protocol, &mut wire).unwrap();
    let mut buf = wire.clone();
    let Some(Packet::ConnectFrame(frame)) =
        decode(&mut buf, &Limits::new(connect.protocol)).unwrap()
    else {
        panic!("a CONNECT decodes as a ConnectFrame");
    };
    (frame, wire)
}

#[test]
fn a_received_connect_reads_as_the_one_sent() {
    for protocol in [ProtocolVersion::V3_1_1, ProtocolVersion::V5] {
        let connect = sent(protocol);
        let (frame, _) = received(&connect);
        assert_eq!(frame.client_id(), "sensor-17");
        assert_eq!(frame.username(), Some("alice"));
        assert_eq!(frame.will_topic(), Some("status/sensor-17"));
        assert_eq!(frame.to_connect(), connect);
        assert_eq!(frame.to_detached(), connect);
        assert_eq!(Packet::ConnectFrame(frame), Packet::from(connect));
    }
}

#[test]
fn detached_values_leave_the_frame_and_shared_ones_stay_in_it() {
    let (frame, _) = received(&sent(ProtocolVersion::V5));
    let inside = |bytes: &[u8]| {
        let span = frame.frame.as_ptr_range();
        span.contains(&bytes.as_ptr())
    };
    let shared = frame.to_connect();
    let detached = frame.to_detached();
    for (connect, in_frame) in [(&shared, true), (&detached, false)] {
        let will = connect.will.as_ref().unwrap();
        let values: [&[u8]; 6] = [
            connect.client_id.as_bytes(),
            connect.username.as_ref().unwrap().as_bytes(),
            connect.password.as_ref().unwrap(),
            will.topic.as_bytes(),
            &will.payload,
            will.properties.content_type.as_ref().unwrap().as_bytes(),
        ];
        for value in values {
            assert_eq!(inside(value), in_frame);
        }
    }
}

#[test]
fn a_received_connect_encodes_back_to_its_bytes() {
    let (frame, wire) = received(&sent(ProtocolVersion::V5));
    let mut again = BytesMut::new();
    encode(
        &Packet::ConnectFrame(frame),
        ProtocolVersion::V3_1_1,
        &mut again,
    )
    .unwrap();
    assert_eq!(again, wire);
}

#[test]
fn a_connect_with_no_optional_fields_has_none() {
    let connect = Connect {
        will: None,
        username: None,
        password: None,
        ..sent(ProtocolVersion::V3_1_1)
    };
    let (frame, _) = received(&connect);
    assert_eq!(frame.username(), None);
    assert_eq!(frame.will_topic(), None);
    assert_eq!(frame.to_detached(), connect);
}
