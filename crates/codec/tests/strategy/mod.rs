//! proptest strategies for valid packets of each protocol version. 3.x packets carry only
//! what 3.x can encode (no properties, Success acknowledgements), so that a round trip is
//! the identity.
#![allow(dead_code)]

mod properties;

use std::num::NonZeroU16;

use bytes::Bytes;
use codec::{
    AckProperties, Auth, ConnAck, Connect, Disconnect, MqttStr, Packet, PacketId, PacketType,
    PingReq, PingResp, ProtocolVersion, PubAck, PubComp, PubRec, PubRel, Publish, QoS, ReasonCode,
    RetainHandling, SubAck, Subscribe, SubscriptionOptions, UnsubAck, Unsubscribe, Will,
};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

pub use properties::{
    ack_properties, auth_properties, connack_properties, connect_properties, disconnect_properties,
    publish_properties, subscribe_properties, unsubscribe_properties, will_properties,
};

fn mqtt(text: String) -> MqttStr {
    MqttStr::try_from(text).expect("strategy produces valid strings")
}

/// Any string (possibly empty, with multi-byte characters).
pub fn text() -> impl Strategy<Value = MqttStr> {
    "[a-zA-Z0-9 /_\u{e9}\u{4e2d}\u{1F600}-]{0,12}".prop_map(mqtt)
}

/// A topic name: non-empty, no wildcards.
pub fn topic() -> impl Strategy<Value = MqttStr> {
    "[a-zA-Z0-9/_\u{e9}\u{4e2d}-]{1,12}".prop_map(mqtt)
}

/// A topic filter: non-empty, wildcards anywhere (syntax is the router's business).
pub fn filter() -> impl Strategy<Value = MqttStr> {
    "[a-z0-9/+#]{1,10}".prop_map(mqtt)
}

pub fn binary() -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..32).prop_map(Bytes::from)
}

pub fn packet_id() -> impl Strategy<Value = PacketId> {
    (1u16..=u16::MAX).prop_map(|v| PacketId::new(v).expect("non-zero"))
}

pub fn qos() -> impl Strategy<Value = QoS> {
    prop_oneof![
        Just(QoS::AtMostOnce),
        Just(QoS::AtLeastOnce),
        Just(QoS::ExactlyOnce)
    ]
}

pub fn nonzero_u16() -> impl Strategy<Value = NonZeroU16> {
    (1u16..=u16::MAX).prop_map(|v| NonZeroU16::new(v).expect("non-zero"))
}

/// A reason code 5.0 allows in `packet`.
pub fn reason(packet: PacketType) -> impl Strategy<Value = ReasonCode> {
    let allowed: Vec<ReasonCode> = ReasonCode::ALL
        .iter()
        .copied()
        .filter(|c| c.is_allowed_in(packet))
        .collect();
    proptest::sample::select(allowed)
}

/// Properties for 5.0, the empty set for 3.x.
fn props_for<T, S>(protocol: ProtocolVersion, strategy: S) -> BoxedStrategy<T>
where
    T: Default + Clone + std::fmt::Debug + 'static,
    S: Strategy<Value = T> + 'static,
{
    if protocol.is_v5() {
        strategy.boxed()
    } else {
        Just(T::default()).boxed()
    }
}

fn will(protocol: ProtocolVersion) -> impl Strategy<Value = Will> {
    let properties = props_for(protocol, will_properties());
    (topic(), binary(), qos(), any::<bool>(), properties).prop_map(
        |(topic, payload, qos, retain, properties)| Will {
            topic,
            payload,
            qos,
            retain,
            properties,
        },
    )
}

pub fn connect(protocol: ProtocolVersion) -> impl Strategy<Value = Packet> {
    let v5 = protocol.is_v5();
    let client_id = if v5 { text().boxed() } else { topic().boxed() };
    let credentials = (option::of(text()), option::of(binary())).prop_map(move |(user, pass)| {
        // 3.x cannot send a password without a user name.
        let pass = if v5 || user.is_some() { pass } else { None };
        (user, pass)
    });
    let properties = props_for(protocol, connect_properties());
    let fields = (
        any::<bool>(),
        any::<u16>(),
        client_id,
        option::of(will(protocol)),
    );
    (fields, credentials, properties).prop_map(
        move |((clean_start, keep_alive, client_id, will), (username, password), properties)| {
            Packet::from(Connect {
                protocol,
                clean_start,
                keep_alive,
                client_id,
                will,
                username,
                password,
                properties,
            })
        },
    )
}

pub fn connack(protocol: ProtocolVersion) -> impl Strategy<Value = Packet> {
    let code = if protocol.is_v5() {
        reason(PacketType::ConnAck).boxed()
    } else {
        proptest::sample::select(vec![
            ReasonCode::Success,
            ReasonCode::UnsupportedProtocolVersion,
            ReasonCode::ClientIdentifierNotValid,
            ReasonCode::ServerUnavailable,
            ReasonCode::BadUserNameOrPassword,
            ReasonCode::NotAuthorized,
        ])
        .boxed()
    };
    let has_session_flag = protocol != ProtocolVersion::V3_1;
    let properties = props_for(protocol, connack_properties());
    (any::<bool>(), code, properties).prop_map(move |(present, reason_code, properties)| {
        Packet::from(ConnAck {
            session_present: present && has_session_flag,
            reason_code,
            properties,
        })
    })
}

pub fn publish(protocol: ProtocolVersion) -> impl Strategy<Value = Packet> {
    let properties = props_for(protocol, publish_properties());
    let flags = (qos(), any::<bool>(), any::<bool>(), packet_id());
    let v5 = protocol.is_v5();
    (flags, topic(), any::<bool>(), binary(), properties).prop_map(
        move |((qos, dup, retain, id), topic, empty_topic, payload, properties)| {
            let acked = qos != QoS::AtMostOnce;
            let aliased = v5 && properties.topic_alias.is_some() && empty_topic;
            Packet::Publish(Publish {
                dup: dup && acked,
                qos,
                retain,
                content: codec::TopicPayload::new(
                    if aliased { MqttStr::default() } else { topic },
                    payload,
                ),
                packet_id: acked.then_some(id),
                properties: properties.into(),
            })
        },
    )
}

/// The fields every acknowledgement has: reason and properties are Success/empty for 3.x.
fn ack_fields(
    protocol: ProtocolVersion,
    packet: PacketType,
) -> impl Strategy<Value = (PacketId, ReasonCode, AckProperties)> {
    let code = if protocol.is_v5() {
        reason(packet).boxed()
    } else {
        Just(ReasonCode::Success).boxed()
    };
    (packet_id(), code, props_for(protocol, ack_properties()))
}

pub fn acks(protocol: ProtocolVersion) -> impl Strategy<Value = Packet> {
    macro_rules! ack {
        ($name:ident) => {
            ack_fields(protocol, PacketType::$name).prop_map(
                |(packet_id, reason_code, properties)| {
                    Packet::$name($name {
                        packet_id,
                        reason_code,
                        properties,
                    })
                },
            )
        };
    }
    prop_oneof![ack!(PubAck), ack!(PubRec), ack!(PubRel), ack!(PubComp)]
}

fn options(protocol: ProtocolVersion) -> impl Strategy<Value = SubscriptionOptions> {
    let v5 = protocol.is_v5();
    let handling = prop_oneof![
        Just(RetainHandling::SendAtSubscribe),
        Just(RetainHandling::SendIfNew),
        Just(RetainHandling::DoNotSend)
    ];
    (qos(), any::<bool>(), any::<bool>(), handling).prop_map(move |(qos, nl, rap, rh)| {
        let defaults = SubscriptionOptions::default();
        SubscriptionOptions {
            qos,
            no_local: v5 && nl,
            retain_as_published: v5 && rap,
            retain_handling: if v5 { rh } else { defaults.retain_handling },
        }
    })
}

pub fn subscriptions(protocol: ProtocolVersion) -> impl Strategy<Value = Packet> {
    let subscribe = (
        packet_id(),
        vec((filter(), options(protocol)), 1..4),
        props_for(protocol, subscribe_properties()),
    )
        .prop_map(|(packet_id, filters, properties)| {
            Packet::Subscribe(Subscribe {
                packet_id,
                filters,
                properties,
            })
        });
    let codes = if protocol.is_v5() {
        reason(PacketType::SubAck).boxed()
    } else {
        let v3 = [
            ReasonCode::Success,
            ReasonCode::GrantedQoS1,
            ReasonCode::GrantedQoS2,
        ];
        proptest::sample::select([&v3[..], &[ReasonCode::UnspecifiedError]].concat()).boxed()
    };
    let suback = (
        packet_id(),
        vec(codes, 1..4),
        props_for(protocol, ack_properties()),
    )
        .prop_map(|(packet_id, reason_codes, properties)| {
            Packet::SubAck(SubAck {
                packet_id,
                reason_codes,
                properties,
            })
        });
    let unsubscribe = (
        packet_id(),
        vec(filter(), 1..4),
        props_for(protocol, unsubscribe_properties()),
    )
        .prop_map(|(packet_id, filters, properties)| {
            Packet::Unsubscribe(Unsubscribe {
                packet_id,
                filters,
                properties,
            })
        });
    let count = if protocol.is_v5() { 1..4 } else { 0..1 };
    let unsuback = (
        packet_id(),
        vec(reason(PacketType::UnsubAck), count),
        props_for(protocol, ack_properties()),
    )
        .prop_map(|(packet_id, reason_codes, properties)| {
            Packet::UnsubAck(UnsubAck {
                packet_id,
                reason_codes,
                properties,
            })
        });
    prop_oneof![subscribe, suback, unsubscribe, unsuback]
}

pub fn session_end(protocol: ProtocolVersion) -> BoxedStrategy<Packet> {
    let pings = prop_oneof![
        Just(Packet::PingReq(PingReq)),
        Just(Packet::PingResp(PingResp))
    ];
    if !protocol.is_v5() {
        return prop_oneof![pings, Just(Packet::Disconnect(Disconnect::default()))].boxed();
    }
    let disconnect = (reason(PacketType::Disconnect), disconnect_properties()).prop_map(
        |(reason_code, properties)| {
            Packet::Disconnect(Disconnect {
                reason_code,
                properties,
            })
        },
    );
    let auth =
        (reason(PacketType::Auth), auth_properties()).prop_map(|(reason_code, properties)| {
            Packet::Auth(Auth {
                reason_code,
                properties,
            })
        });
    prop_oneof![pings, disconnect, auth].boxed()
}

/// Any valid packet of `protocol`.
pub fn packet(protocol: ProtocolVersion) -> impl Strategy<Value = Packet> {
    prop_oneof![
        1 => connect(protocol),
        1 => connack(protocol),
        3 => publish(protocol),
        1 => acks(protocol),
        1 => subscriptions(protocol),
        1 => session_end(protocol),
    ]
}
