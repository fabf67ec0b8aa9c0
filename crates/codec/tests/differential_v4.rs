//! Differential test against mqttbytes (v4 = MQTT 3.1.1) on valid packets both accept: what
//! RingMQ encodes, mqttbytes decodes to the same fields, and what mqttbytes re-encodes from
//! that, RingMQ decodes back to the original packet.

mod strategy;

use bytes::BytesMut;
use codec::{Limits, Packet, ProtocolVersion, QoS, ReasonCode, decode, encode};
use mqttbytes::v4;
use proptest::prelude::*;

const V4: ProtocolVersion = ProtocolVersion::V3_1_1;
const MAX: usize = 1 << 20;

/// mqttbytes reads user name and password as strings and drops empty ones.
fn representable(packet: &Packet) -> bool {
    match packet {
        Packet::Connect(c) => {
            let user_ok = c.username.as_ref().is_none_or(|u| !u.is_empty());
            let pass_ok = c.password.as_ref().is_none_or(|p| {
                !p.is_empty() && std::str::from_utf8(p).is_ok_and(|s| !s.contains('\0'))
            });
            user_ok && pass_ok
        }
        _ => true,
    }
}

fn qos(theirs: mqttbytes::QoS) -> QoS {
    QoS::from_u8(theirs as u8).expect("mqttbytes QoS is 0..=2")
}

fn same_connect(a: &codec::Connect, b: &v4::Connect) {
    assert_eq!(a.keep_alive, b.keep_alive);
    assert_eq!(a.client_id.as_str(), b.client_id);
    assert_eq!(a.clean_start, b.clean_session);
    assert_eq!(a.will.is_some(), b.last_will.is_some());
    if let (Some(w), Some(l)) = (&a.will, &b.last_will) {
        assert_eq!(w.topic.as_str(), l.topic);
        assert_eq!(w.payload, l.message);
        assert_eq!(w.qos, qos(l.qos));
        assert_eq!(w.retain, l.retain);
    }
    let user = a.username.as_ref().map(|u| u.as_str().to_owned());
    let pass = a
        .password
        .as_ref()
        .map(|p| String::from_utf8(p.to_vec()).expect("utf-8"));
    let login = b.login.as_ref();
    assert_eq!(
        user.unwrap_or_default(),
        login.map(|l| l.username.clone()).unwrap_or_default()
    );
    assert_eq!(
        pass.unwrap_or_default(),
        login.map(|l| l.password.clone()).unwrap_or_default()
    );
}

fn suback_code(code: &v4::SubscribeReasonCode) -> ReasonCode {
    match code {
        v4::SubscribeReasonCode::Success(q) => ReasonCode::granted(qos(*q)),
        v4::SubscribeReasonCode::Failure => ReasonCode::UnspecifiedError,
    }
}

/// Asserts that both decoders saw the same packet.
fn assert_same(ours: &Packet, theirs: &v4::Packet) {
    use v4::Packet as T;
    match (ours, theirs) {
        (Packet::Connect(a), T::Connect(b)) => same_connect(a, b),
        (Packet::ConnectFrame(a), T::Connect(b)) => same_connect(&a.to_connect(), b),
        (Packet::ConnAck(a), T::ConnAck(b)) => {
            assert_eq!(a.session_present, b.session_present);
            let code = [0x00, 0x84, 0x85, 0x88, 0x86, 0x87][b.code as usize];
            assert_eq!(a.reason_code.as_u8(), code);
        }
        (Packet::Publish(a), T::Publish(b)) => {
            assert_eq!((a.dup, a.qos, a.retain), (b.dup, qos(b.qos), b.retain));
            assert_eq!(a.topic(), b.topic);
            assert_eq!(a.packet_id.map_or(0, |id| id.get()), b.pkid);
            assert_eq!(a.payload(), b.payload);
        }
        (Packet::PubAck(a), T::PubAck(b)) => assert_eq!(a.packet_id.get(), b.pkid),
        (Packet::PubRec(a), T::PubRec(b)) => assert_eq!(a.packet_id.get(), b.pkid),
        (Packet::PubRel(a), T::PubRel(b)) => assert_eq!(a.packet_id.get(), b.pkid),
        (Packet::PubComp(a), T::PubComp(b)) => assert_eq!(a.packet_id.get(), b.pkid),
        (Packet::Subscribe(a), T::Subscribe(b)) => {
            assert_eq!(a.packet_id.get(), b.pkid);
            let ours: Vec<_> = a.filters.iter().map(|(f, o)| (f.as_str(), o.qos)).collect();
            let theirs: Vec<_> = b
                .filters
                .iter()
                .map(|f| (f.path.as_str(), qos(f.qos)))
                .collect();
            assert_eq!(ours, theirs);
        }
        (Packet::SubAck(a), T::SubAck(b)) => {
            assert_eq!(a.packet_id.get(), b.pkid);
            let theirs: Vec<_> = b.return_codes.iter().map(suback_code).collect();
            assert_eq!(a.reason_codes, theirs);
        }
        (Packet::Unsubscribe(a), T::Unsubscribe(b)) => {
            assert_eq!(a.packet_id.get(), b.pkid);
            let ours: Vec<_> = a.filters.iter().map(|f| f.as_str()).collect();
            assert_eq!(ours, b.topics);
        }
        (Packet::UnsubAck(a), T::UnsubAck(b)) => assert_eq!(a.packet_id.get(), b.pkid),
        (Packet::PingReq(_), T::PingReq)
        | (Packet::PingResp(_), T::PingResp)
        | (Packet::Disconnect(_), T::Disconnect) => {}
        _ => panic!("different packets: {ours:?} and {theirs:?}"),
    }
}

fn write_theirs(packet: &v4::Packet, buf: &mut BytesMut) {
    use v4::Packet as T;
    let written = match packet {
        T::Connect(p) => p.write(buf),
        T::ConnAck(p) => p.write(buf),
        T::Publish(p) => p.write(buf),
        T::PubAck(p) => p.write(buf),
        T::PubRec(p) => p.write(buf),
        T::PubRel(p) => p.write(buf),
        T::PubComp(p) => p.write(buf),
        T::Subscribe(p) => p.write(buf),
        T::SubAck(p) => p.write(buf),
        T::Unsubscribe(p) => p.write(buf),
        T::UnsubAck(p) => p.write(buf),
        T::PingReq => v4::PingReq.write(buf),
        T::PingResp => v4::PingResp.write(buf),
        T::Disconnect => v4::Disconnect.write(buf),
    };
    written.expect("mqttbytes encodes what it decoded");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn both_decoders_agree(ours in strategy::packet(V4).prop_filter("mqttbytes", representable)) {
        let mut wire = BytesMut::new();
        encode(&ours, V4, &mut wire).expect("valid packet");
        let mut their_input = wire.clone();
        let theirs = v4::read(&mut their_input, MAX).expect("mqttbytes accepts it");
        assert_same(&ours, &theirs);

        let mut their_wire = BytesMut::new();
        write_theirs(&theirs, &mut their_wire);
        let back = decode(&mut their_wire, &Limits::new(V4)).expect("we accept mqttbytes' encoding");
        prop_assert_eq!(back, Some(ours));
    }
}
