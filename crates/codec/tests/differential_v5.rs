//! Differential test against mqttbytes v5 on valid packets both accept: what RingMQ encodes,
//! mqttbytes decodes to the same fields (properties included), and what mqttbytes re-encodes
//! from that, RingMQ decodes back to the original packet.
//!
//! Left out, as mqttbytes 0.6 cannot read them: AUTH (not implemented), DISCONNECT without
//! properties (it requires the property length that MQTT 5.0 3.14.2.2 lets a sender omit when
//! the remaining length is below 2), and empty user names or passwords (it cannot tell them
//! from absent ones).

mod strategy;

use bytes::{Bytes, BytesMut};
use codec::{
    AckProperties, Limits, MqttStr, Packet, ProtocolVersion, QoS, UserProperty, decode, encode,
};
use mqttbytes::v5;
use proptest::prelude::*;

const V5: ProtocolVersion = ProtocolVersion::V5;
const MAX: usize = 1 << 20;

fn representable(packet: &Packet) -> bool {
    match packet {
        Packet::Auth(_) => false,
        Packet::Disconnect(d) => d.properties != Default::default(),
        Packet::Connect(c) => {
            let user_ok = c.username.as_ref().is_none_or(|u| !u.is_empty());
            let pass_ok = c.password.as_ref().is_none_or(|p| {
                !p.is_empty() && std::str::from_utf8(p).is_ok_and(|s| !s.contains('\0'))
            });
            user_ok && pass_ok && (c.password.is_none() || c.username.is_some())
        }
        _ => true,
    }
}

fn text(s: &Option<MqttStr>) -> Option<&str> {
    s.as_ref().map(MqttStr::as_str)
}

fn users(pairs: &[UserProperty]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn qos(theirs: mqttbytes::QoS) -> QoS {
    QoS::from_u8(theirs as u8).expect("mqttbytes QoS is 0..=2")
}

/// Reason string and user properties of an acknowledgement; mqttbytes has one struct per
/// packet with these two fields.
fn same_ack(
    ours: &AckProperties,
    reason: Option<&String>,
    theirs_users: Option<&Vec<(String, String)>>,
) {
    assert_eq!(text(&ours.reason_string), reason.map(String::as_str));
    assert_eq!(
        users(&ours.user_properties),
        theirs_users.cloned().unwrap_or_default()
    );
}

/// A field of optional mqttbytes properties (absent properties read as empty fields).
macro_rules! get {
    ($props:expr, $field:ident) => {
        $props.map(|p| p.$field.clone()).unwrap_or_default()
    };
}

macro_rules! ack_props {
    ($theirs:expr) => {
        (
            $theirs.as_ref().and_then(|p| p.reason_string.as_ref()),
            $theirs.as_ref().map(|p| &p.user_properties),
        )
    };
}

fn same_publish(a: &codec::Publish, b: &v5::Publish) {
    assert_eq!((a.dup, a.qos, a.retain), (b.dup, qos(b.qos), b.retain));
    assert_eq!(a.topic(), b.topic);
    assert_eq!(a.packet_id.map_or(0, |id| id.get()), b.pkid);
    assert_eq!(a.payload(), b.payload);
    let p = &a.properties;
    let t = b.properties.as_ref();
    assert_eq!(
        p.payload_format.map(|f| f as u8),
        get!(t, payload_format_indicator)
    );
    assert_eq!(p.message_expiry_interval, get!(t, message_expiry_interval));
    assert_eq!(p.topic_alias.map(|a| a.get()), get!(t, topic_alias));
    let app = &p.application;
    assert_eq!(
        text(&app.response_topic()),
        get!(t, response_topic).as_deref()
    );
    assert_eq!(app.correlation_data(), get!(t, correlation_data));
    let pairs: Vec<UserProperty> = app.user_properties().collect();
    assert_eq!(users(&pairs), get!(t, user_properties));
    let ids: Vec<usize> = p
        .subscription_identifiers
        .iter()
        .map(|i| i.get() as usize)
        .collect();
    assert_eq!(ids, get!(t, subscription_identifiers));
    assert_eq!(text(&app.content_type()), get!(t, content_type).as_deref());
}

fn same_connect(a: &codec::Connect, b: &v5::Connect) {
    assert_eq!(
        (a.keep_alive, a.clean_start),
        (b.keep_alive, b.clean_session)
    );
    assert_eq!(a.client_id.as_str(), b.client_id);
    assert_eq!(
        text(&a.username),
        b.login.as_ref().map(|l| l.username.as_str())
    );
    let pass = b.login.as_ref().map(|l| Bytes::from(l.password.clone()));
    assert_eq!(a.password, pass.filter(|p| !p.is_empty()));
    let p = &a.properties;
    let t = b.properties.as_ref();
    assert_eq!(p.session_expiry_interval, get!(t, session_expiry_interval));
    assert_eq!(p.receive_maximum.map(|v| v.get()), get!(t, receive_maximum));
    assert_eq!(
        p.maximum_packet_size.map(|v| v.get()),
        get!(t, max_packet_size)
    );
    assert_eq!(p.topic_alias_maximum, get!(t, topic_alias_max));
    assert_eq!(
        p.request_response_information.map(u8::from),
        get!(t, request_response_info)
    );
    assert_eq!(
        p.request_problem_information.map(u8::from),
        get!(t, request_problem_info)
    );
    assert_eq!(users(&p.user_properties), get!(t, user_properties));
    assert_eq!(
        text(&p.authentication_method),
        get!(t, authentication_method).as_deref()
    );
    assert_eq!(p.authentication_data, get!(t, authentication_data));
    assert_eq!(a.will.is_some(), b.last_will.is_some());
    if let (Some(w), Some(l)) = (&a.will, &b.last_will) {
        assert_eq!(
            (w.topic.as_str(), &w.payload),
            (l.topic.as_str(), &l.message)
        );
        assert_eq!((w.qos, w.retain), (qos(l.qos), l.retain));
        let t = l.properties.as_ref();
        let p = &w.properties;
        assert_eq!(p.will_delay_interval, get!(t, delay_interval));
        assert_eq!(
            p.payload_format.map(|f| f as u8),
            get!(t, payload_format_indicator)
        );
        assert_eq!(p.message_expiry_interval, get!(t, message_expiry_interval));
        assert_eq!(text(&p.content_type), get!(t, content_type).as_deref());
        assert_eq!(text(&p.response_topic), get!(t, response_topic).as_deref());
        assert_eq!(p.correlation_data, get!(t, correlation_data));
        assert_eq!(users(&p.user_properties), get!(t, user_properties));
    }
}

fn same_connack(a: &codec::ConnAck, b: &v5::ConnAck) {
    assert_eq!(a.session_present, b.session_present);
    assert_eq!(a.reason_code.as_u8(), b.code as u8);
    let p = &a.properties;
    let t = b.properties.as_ref();
    assert_eq!(p.session_expiry_interval, get!(t, session_expiry_interval));
    assert_eq!(p.receive_maximum.map(|v| v.get()), get!(t, receive_max));
    assert_eq!(p.maximum_qos.map(QoS::as_u8), get!(t, max_qos));
    assert_eq!(p.retain_available.map(u8::from), get!(t, retain_available));
    assert_eq!(
        p.maximum_packet_size.map(|v| v.get()),
        get!(t, max_packet_size)
    );
    assert_eq!(
        text(&p.assigned_client_identifier),
        get!(t, assigned_client_identifier).as_deref()
    );
    assert_eq!(p.topic_alias_maximum, get!(t, topic_alias_max));
    assert_eq!(text(&p.reason_string), get!(t, reason_string).as_deref());
    assert_eq!(users(&p.user_properties), get!(t, user_properties));
    let flags = [
        p.wildcard_subscription_available,
        p.subscription_identifiers_available,
        p.shared_subscription_available,
    ];
    let theirs = [
        get!(t, wildcard_subscription_available),
        get!(t, subscription_identifiers_available),
        get!(t, shared_subscription_available),
    ];
    assert_eq!(flags.map(|f| f.map(u8::from)), theirs);
    assert_eq!(p.server_keep_alive, get!(t, server_keep_alive));
    assert_eq!(
        text(&p.response_information),
        get!(t, response_information).as_deref()
    );
    assert_eq!(
        text(&p.server_reference),
        get!(t, server_reference).as_deref()
    );
    assert_eq!(
        text(&p.authentication_method),
        get!(t, authentication_method).as_deref()
    );
    assert_eq!(p.authentication_data, get!(t, authentication_data));
}

fn same_subscribe(a: &codec::Subscribe, b: &v5::Subscribe) {
    assert_eq!(a.packet_id.get(), b.pkid);
    let t = b.properties.as_ref();
    let id = a
        .properties
        .subscription_identifier
        .map(|i| i.get() as usize);
    assert_eq!(id, get!(t, id));
    assert_eq!(
        users(&a.properties.user_properties),
        get!(t, user_properties)
    );
    assert_eq!(a.filters.len(), b.filters.len());
    for ((filter, options), theirs) in a.filters.iter().zip(&b.filters) {
        assert_eq!(filter.as_str(), theirs.path);
        assert_eq!(options.qos, qos(theirs.qos));
        assert_eq!(options.no_local, theirs.nolocal);
        assert_eq!(options.retain_as_published, theirs.preserve_retain);
        assert_eq!(
            options.retain_handling as u8,
            theirs.retain_forward_rule.clone() as u8
        );
    }
}

/// Compares the four publish acknowledgements; false if the pair is not one of them.
fn same_publish_ack(ours: &Packet, theirs: &v5::Packet) -> bool {
    use v5::Packet as T;
    match (ours, theirs) {
        (Packet::PubAck(a), T::PubAck(b)) => {
            assert_eq!(
                (a.packet_id.get(), a.reason_code.as_u8()),
                (b.pkid, b.reason as u8)
            );
            let (reason, users) = ack_props!(b.properties);
            same_ack(&a.properties, reason, users);
        }
        (Packet::PubRec(a), T::PubRec(b)) => {
            assert_eq!(
                (a.packet_id.get(), a.reason_code.as_u8()),
                (b.pkid, b.reason as u8)
            );
            let (reason, users) = ack_props!(b.properties);
            same_ack(&a.properties, reason, users);
        }
        (Packet::PubRel(a), T::PubRel(b)) => {
            assert_eq!(
                (a.packet_id.get(), a.reason_code.as_u8()),
                (b.pkid, b.reason as u8)
            );
            let (reason, users) = ack_props!(b.properties);
            same_ack(&a.properties, reason, users);
        }
        (Packet::PubComp(a), T::PubComp(b)) => {
            assert_eq!(
                (a.packet_id.get(), a.reason_code.as_u8()),
                (b.pkid, b.reason as u8)
            );
            let (reason, users) = ack_props!(b.properties);
            same_ack(&a.properties, reason, users);
        }
        _ => return false,
    }
    true
}

/// Asserts that both decoders saw the same packet.
fn assert_same(ours: &Packet, theirs: &v5::Packet) {
    use v5::Packet as T;
    if same_publish_ack(ours, theirs) {
        return;
    }
    match (ours, theirs) {
        (Packet::Connect(a), T::Connect(b)) => same_connect(a, b),
        (Packet::ConnectFrame(a), T::Connect(b)) => same_connect(&a.to_connect(), b),
        (Packet::ConnAck(a), T::ConnAck(b)) => same_connack(a, b),
        (Packet::Publish(a), T::Publish(b)) => same_publish(a, b),
        (Packet::Subscribe(a), T::Subscribe(b)) => same_subscribe(a, b),
        (Packet::SubAck(a), T::SubAck(b)) => {
            assert_eq!(a.packet_id.get(), b.pkid);
            let codes: Vec<u8> = b.return_codes.iter().map(|c| *c as u8).collect();
            let ours: Vec<u8> = a.reason_codes.iter().map(|c| c.as_u8()).collect();
            assert_eq!(ours, codes);
            let (reason, users) = ack_props!(b.properties);
            same_ack(&a.properties, reason, users);
        }
        (Packet::Unsubscribe(a), T::Unsubscribe(b)) => {
            assert_eq!(a.packet_id.get(), b.pkid);
            let ours: Vec<&str> = a.filters.iter().map(MqttStr::as_str).collect();
            assert_eq!(ours, b.filters);
            let theirs = get!(b.properties.as_ref(), user_properties);
            assert_eq!(users(&a.properties.user_properties), theirs);
        }
        (Packet::UnsubAck(a), T::UnsubAck(b)) => {
            assert_eq!(a.packet_id.get(), b.pkid);
            let codes: Vec<u8> = b.reasons.iter().map(|c| *c as u8).collect();
            let ours: Vec<u8> = a.reason_codes.iter().map(|c| c.as_u8()).collect();
            assert_eq!(ours, codes);
            let (reason, users) = ack_props!(b.properties);
            same_ack(&a.properties, reason, users);
        }
        (Packet::Disconnect(a), T::Disconnect(b)) => {
            assert_eq!(a.reason_code.as_u8(), b.reason_code as u8);
            let p = &a.properties;
            let t = b.properties.as_ref();
            assert_eq!(p.session_expiry_interval, get!(t, session_expiry_interval));
            assert_eq!(text(&p.reason_string), get!(t, reason_string).as_deref());
            assert_eq!(users(&p.user_properties), get!(t, user_properties));
            assert_eq!(
                text(&p.server_reference),
                get!(t, server_reference).as_deref()
            );
        }
        (Packet::PingReq(_), T::PingReq) | (Packet::PingResp(_), T::PingResp) => {}
        _ => panic!("different packets: {ours:?} and {theirs:?}"),
    }
}

fn write_theirs(packet: &v5::Packet, buf: &mut BytesMut) {
    use v5::Packet as T;
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
        T::PingReq => v5::PingReq.write(buf),
        T::PingResp => v5::PingResp.write(buf),
        T::Disconnect(p) => p.write(buf),
    };
    written.expect("mqttbytes encodes what it decoded");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn both_decoders_agree(ours in strategy::packet(V5).prop_filter("mqttbytes", representable)) {
        let mut wire = BytesMut::new();
        encode(&ours, V5, &mut wire).expect("valid packet");
        let mut their_input = wire.clone();
        let theirs = v5::read(&mut their_input, MAX).expect("mqttbytes accepts it");
        assert_same(&ours, &theirs);

        let mut their_wire = BytesMut::new();
        write_theirs(&theirs, &mut their_wire);
        let back = decode(&mut their_wire, &Limits::new(V5)).expect("we accept mqttbytes' encoding");
        prop_assert_eq!(back, Some(ours));
    }
}
