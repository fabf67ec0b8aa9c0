//! `SharedPublish`: per-subscriber frames that decode to the right PUBLISH and share the
//! payload and the common properties instead of copying them.

mod common;
mod strategy;

use std::num::NonZeroU16;

use bytes::{Bytes, BytesMut};
use codec::{
    EncodeError, FrameOptions, Packet, PayloadFormat, ProtocolVersion, Publish, PublishProperties,
    QoS, SharedPublish, SubscriptionId, TopicAliasUse,
};
use common::{decode_one, encode_one, pid, s};
use proptest::prelude::*;

const V3: ProtocolVersion = ProtocolVersion::V3_1_1;
const V5: ProtocolVersion = ProtocolVersion::V5;

fn shared_properties() -> PublishProperties {
    PublishProperties {
        payload_format: Some(PayloadFormat::Utf8),
        application: codec::AppProperties::builder()
            .content_type(Some(s("text/plain")))
            .user_property(s("origin"), s("sensor"))
            .build()
            .expect("valid"),
        // Per-subscriber properties: the template ignores them.
        message_expiry_interval: Some(999),
        subscription_identifiers: vec![SubscriptionId::new(9).expect("valid")],
        ..PublishProperties::default()
    }
}

fn message() -> SharedPublish {
    let payload = Bytes::from(vec![b'x'; 300]);
    SharedPublish::new(s("a/b"), payload, &shared_properties()).expect("valid message")
}

fn frame_bytes(shared: &SharedPublish, options: &FrameOptions<'_>) -> BytesMut {
    let frame = shared
        .frame(options, &mut BytesMut::new())
        .expect("encodable frame");
    let mut wire = BytesMut::new();
    frame.write_to(&mut wire);
    assert_eq!(wire.len(), frame.len());
    assert_eq!(shared.frame_len(options), Ok(frame.len()));
    // The contiguous form (header and payload copied into one buffer after earlier bytes)
    // is the same frame.
    let mut contiguous = BytesMut::from(&b"earlier"[..]);
    shared
        .write_frame(options, &mut contiguous)
        .expect("encodable frame");
    assert_eq!(&contiguous[..7], b"earlier");
    assert_eq!(&contiguous[7..], &wire[..]);
    wire
}

#[test]
fn a_3_1_1_frame_equals_the_plain_encoding() {
    let shared = message();
    let options = FrameOptions {
        qos: QoS::AtLeastOnce,
        packet_id: Some(pid(7)),
        retain: true,
        ..FrameOptions::new(V3)
    };
    let plain = Publish {
        dup: false,
        qos: QoS::AtLeastOnce,
        retain: true,
        content: codec::TopicPayload::new(s("a/b"), shared.payload().clone()),
        packet_id: Some(pid(7)),
        properties: PublishProperties::default().into(),
    };
    let expected = encode_one(&Packet::Publish(plain), V3);
    assert_eq!(frame_bytes(&shared, &options), expected);
}

#[test]
fn a_5_0_frame_carries_shared_and_per_subscriber_properties() {
    let shared = message();
    let ids = [
        SubscriptionId::new(1).expect("valid"),
        SubscriptionId::new(300).expect("valid"),
    ];
    let alias = NonZeroU16::new(4).expect("non-zero");
    let options = FrameOptions {
        qos: QoS::ExactlyOnce,
        packet_id: Some(pid(12)),
        dup: true,
        message_expiry_interval: Some(30),
        topic_alias: Some(TopicAliasUse::Establish(alias)),
        subscription_identifiers: &ids,
        ..FrameOptions::new(V5)
    };
    let Ok(Packet::Publish(publish)) = decode_one(&frame_bytes(&shared, &options), V5) else {
        panic!("the frame is a PUBLISH");
    };
    let expected = PublishProperties {
        message_expiry_interval: Some(30),
        topic_alias: Some(alias),
        subscription_identifiers: ids.to_vec(),
        ..shared_properties()
    };
    assert_eq!(publish.properties, expected.into());
    assert_eq!(
        (publish.qos, publish.dup, publish.retain),
        (QoS::ExactlyOnce, true, false)
    );
    assert_eq!(publish.packet_id, Some(pid(12)));
    assert_eq!(publish.topic(), "a/b");
    assert_eq!(publish.payload(), &shared.payload()[..]);
}

#[test]
fn reusing_an_alias_sends_an_empty_topic() {
    let alias = NonZeroU16::new(4).expect("non-zero");
    let options = FrameOptions {
        topic_alias: Some(TopicAliasUse::Reuse(alias)),
        ..FrameOptions::new(V5)
    };
    let Ok(Packet::Publish(publish)) = decode_one(&frame_bytes(&message(), &options), V5) else {
        panic!("the frame is a PUBLISH");
    };
    assert!(publish.topic().is_empty());
    assert_eq!(publish.properties.topic_alias, Some(alias));
    let on_3_1_1 = FrameOptions {
        protocol: V3,
        ..options
    };
    let Ok(Packet::Publish(publish)) = decode_one(&frame_bytes(&message(), &on_3_1_1), V3) else {
        panic!("the frame is a PUBLISH");
    };
    assert_eq!(
        publish.topic(),
        "a/b",
        "3.1.1 has no aliases: the topic is always sent"
    );
}

#[test]
fn frames_share_the_payload_and_the_common_properties() {
    let shared = message();
    let mut scratch = BytesMut::with_capacity(4096);
    let first = shared
        .frame(&FrameOptions::new(V5), &mut scratch)
        .expect("valid");
    let second = shared
        .frame(&FrameOptions::new(V5), &mut scratch)
        .expect("valid");
    assert_eq!(first.payload.as_ptr(), shared.payload().as_ptr());
    assert_eq!(second.payload.as_ptr(), shared.payload().as_ptr());
    assert_eq!(first.properties.as_ptr(), second.properties.as_ptr());
    assert!(
        first.header.len() < 16,
        "only the small header is per subscriber"
    );
    assert_eq!(
        first.parts().map(Bytes::len).iter().sum::<usize>(),
        first.len()
    );
}

#[test]
fn invalid_frames_and_messages_are_refused() {
    let shared = message();
    let missing_id = FrameOptions {
        qos: QoS::AtLeastOnce,
        ..FrameOptions::new(V5)
    };
    let error = shared.frame(&missing_id, &mut BytesMut::new());
    assert_eq!(
        error,
        Err(EncodeError::PacketIdMismatch {
            qos: QoS::AtLeastOnce
        })
    );
    let wildcard = SharedPublish::new(s("a/#"), Bytes::new(), &PublishProperties::default());
    let field = "topic name";
    assert_eq!(wildcard, Err(EncodeError::InvalidTopicName { field }));
}

#[test]
fn built_from_a_decoded_publish() {
    let received = Publish {
        dup: false,
        qos: QoS::AtMostOnce,
        retain: false,
        content: codec::TopicPayload::new(s("t"), Bytes::from_static(b"hello")),
        packet_id: None,
        properties: shared_properties().into(),
    };
    let shared = SharedPublish::from_publish(&received).expect("valid");
    assert_eq!(shared.topic(), received.topic());
    assert_eq!(shared.payload().as_ptr(), received.payload().as_ptr());
}

fn any_version() -> impl Strategy<Value = ProtocolVersion> {
    proptest::sample::select(vec![ProtocolVersion::V3_1, V3, V5])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_frame_decodes_to_the_publish_it_describes(
        protocol in any_version(),
        (topic, payload) in (strategy::topic(), strategy::binary()),
        properties in strategy::publish_properties(),
        (qos, id, dup, retain) in (strategy::qos(), strategy::packet_id(), any::<bool>(), any::<bool>()),
        (alias, reuse) in (proptest::option::of(strategy::nonzero_u16()), any::<bool>()),
    ) {
        let shared = SharedPublish::new(topic.clone(), payload.clone(), &properties)
            .expect("valid message");
        let acked = qos != QoS::AtMostOnce;
        let alias_use = alias.map(|a| if reuse { TopicAliasUse::Reuse(a) } else { TopicAliasUse::Establish(a) });
        let options = FrameOptions {
            protocol,
            qos,
            packet_id: acked.then_some(id),
            dup: dup && acked,
            retain,
            message_expiry_interval: properties.message_expiry_interval,
            topic_alias: alias_use,
            subscription_identifiers: &properties.subscription_identifiers,
        };
        let v5 = protocol.is_v5();
        let expected = Publish {
            dup: dup && acked,
            qos,
            retain,
            content: codec::TopicPayload::new(if v5 && alias.is_some() && reuse { s("") } else { topic }, payload),
            packet_id: acked.then_some(id),
            properties: if v5 {
                PublishProperties { topic_alias: alias, ..properties.clone() }.into()
            } else {
                PublishProperties::default().into()
            },
        };
        let wire = frame_bytes(&shared, &options);
        prop_assert_eq!(decode_one(&wire, protocol), Ok(Packet::Publish(expected)));
    }
}
