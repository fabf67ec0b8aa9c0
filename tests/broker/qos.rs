//! QoS 0/1/2 flows in 3.1.1 and 5.0: delivery with the lower QoS, offline queueing, redelivery
//! with DUP after reconnect, and the QoS 2 duplicate cases in both directions.

use codec::{Packet, PubRel, QoS, ReasonCode};

use crate::client::{QUIET, RawClient, V5, V311, persistent_connect, pid, publish_packet};
use crate::harness::TestBroker;

const LEVELS: [QoS; 3] = [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce];

#[test]
fn every_publish_and_subscription_qos_pair_delivers_the_lower_qos() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut publisher = RawClient::connected_clean(broker.addr(), protocol, "pub");
        let mut subscriber = RawClient::connected_clean(broker.addr(), protocol, "sub");
        for granted in LEVELS {
            let filter = format!("qos/{}/+", granted.as_u8());
            subscriber.subscribe(&filter, granted);
            for sent in LEVELS {
                let topic = format!("qos/{}/{}", granted.as_u8(), sent.as_u8());
                let payload = format!("{protocol:?} {topic}");
                let reason = publisher.publish_simple(&topic, payload.as_bytes(), sent);
                assert_eq!(reason, ReasonCode::Success, "{payload}");
                let got = subscriber.expect_publish_acked();
                assert_eq!(got.topic(), topic.as_str());
                assert_eq!(got.payload(), payload.as_bytes());
                assert_eq!(got.qos, sent.min(granted), "{payload}");
                assert_eq!(got.packet_id.is_some(), got.qos != QoS::AtMostOnce);
                assert!(!got.dup && !got.retain);
            }
        }
        subscriber.ping();
        subscriber.expect_silence(QUIET);
    }
}

#[test]
fn v5_puback_says_no_matching_subscribers() {
    let broker = TestBroker::start();
    let mut client = RawClient::connected_clean(broker.addr(), V5, "lonely");
    assert_eq!(
        client.publish_simple("nobody/here", b"x", QoS::AtLeastOnce),
        ReasonCode::NoMatchingSubscribers
    );
    assert_eq!(
        client.publish_simple("nobody/here", b"x", QoS::ExactlyOnce),
        ReasonCode::NoMatchingSubscribers
    );
}

#[test]
fn messages_for_an_offline_session_are_queued_in_order() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let id = format!("offline-{protocol:?}");
        // A topic of each round's own: the earlier round's session, offline too, gets none of
        // this round's messages, and so counts no QoS 0 drop of its own that the wait below
        // would take for this session's (a CI run under epoll got m3 live so).
        let root = format!("off-{protocol:?}");
        let mut sub = RawClient::connected(broker.addr(), persistent_connect(protocol, &id, 300));
        sub.subscribe(&format!("{root}/#"), QoS::ExactlyOnce);
        sub.disconnect();
        let mut publisher = RawClient::connected_clean(broker.addr(), protocol, "off-pub");
        let dropped = broker.metrics().messages_dropped;
        for (i, qos) in [
            QoS::AtLeastOnce,
            QoS::ExactlyOnce,
            QoS::AtLeastOnce,
            QoS::AtMostOnce,
        ]
        .into_iter()
        .enumerate()
        {
            publisher.publish_simple(&format!("{root}/{i}"), format!("m{i}").as_bytes(), qos);
        }
        // QoS 0 messages are not kept for an offline session: the last one is dropped (and the
        // earlier ones, on the same path, have reached the session by then).
        broker.wait_for_metrics("the QoS 0 drop", |m| m.messages_dropped > dropped);
        let (mut sub, connack) =
            RawClient::connect(broker.addr(), persistent_connect(protocol, &id, 300));
        assert!(connack.session_present);
        for (i, qos) in [
            (0, QoS::AtLeastOnce),
            (1, QoS::ExactlyOnce),
            (2, QoS::AtLeastOnce),
        ] {
            let got = sub.expect_publish_acked();
            assert_eq!(got.payload(), format!("m{i}").as_bytes());
            assert_eq!(got.qos, qos);
            assert!(!got.dup, "first delivery");
        }
        sub.ping();
        sub.expect_silence(QUIET);
        sub.disconnect();
    }
}

#[test]
fn unacknowledged_qos1_and_qos2_are_resent_with_dup_after_reconnect() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let id = format!("dup-{protocol:?}");
        let mut sub = RawClient::connected(broker.addr(), persistent_connect(protocol, &id, 300));
        sub.subscribe("dup/+", QoS::ExactlyOnce);
        let mut publisher = RawClient::connected_clean(broker.addr(), protocol, "dup-pub");
        publisher.publish_simple("dup/1", b"one", QoS::AtLeastOnce);
        publisher.publish_simple("dup/2", b"two", QoS::ExactlyOnce);
        let first: Vec<_> = (0..2).map(|_| sub.expect_publish()).collect();
        sub.drop_abruptly();

        let (mut sub, connack) =
            RawClient::connect(broker.addr(), persistent_connect(protocol, &id, 300));
        assert!(connack.session_present);
        for original in &first {
            let again = sub.expect_publish();
            assert!(again.dup, "resent with DUP");
            assert_eq!(again.packet_id, original.packet_id, "same packet id");
            assert_eq!(again.payload(), original.payload());
            assert_eq!(again.qos, original.qos);
            sub.acknowledge(&again);
        }
        sub.ping();
        sub.expect_silence(QUIET);
        sub.disconnect();
    }
}

#[test]
fn pubrel_is_resent_after_reconnect_when_pubcomp_is_missing() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let id = format!("rel-{protocol:?}");
        let mut sub = RawClient::connected(broker.addr(), persistent_connect(protocol, &id, 300));
        sub.subscribe("rel", QoS::ExactlyOnce);
        let mut publisher = RawClient::connected_clean(broker.addr(), protocol, "rel-pub");
        publisher.publish_simple("rel", b"two", QoS::ExactlyOnce);
        let got = sub.expect_publish();
        let packet_id = got.packet_id.expect("QoS 2 has a packet id");
        sub.send(&Packet::PubRec(codec::PubRec::new(packet_id)));
        match sub.recv() {
            Packet::PubRel(rel) => assert_eq!(rel.packet_id, packet_id),
            other => panic!("expected PUBREL, got {other:?}"),
        }
        sub.drop_abruptly();

        let (mut sub, connack) =
            RawClient::connect(broker.addr(), persistent_connect(protocol, &id, 300));
        assert!(connack.session_present);
        match sub.recv() {
            Packet::PubRel(rel) => assert_eq!(rel.packet_id, packet_id, "PUBREL owed is resent"),
            other => panic!("expected the owed PUBREL, got {other:?}"),
        }
        sub.send(&Packet::PubComp(codec::PubComp::new(packet_id)));
        sub.ping();
        sub.expect_silence(QUIET);
        sub.disconnect();
    }
}

#[test]
fn duplicate_inbound_qos2_before_pubrel_is_forwarded_once() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut sub = RawClient::connected_clean(broker.addr(), protocol, "q2-sub");
        sub.subscribe("q2", QoS::AtLeastOnce);
        let mut publisher = RawClient::connected_clean(broker.addr(), protocol, "q2-pub");
        let mut publish = publish_packet("q2", b"once", QoS::ExactlyOnce, Some(7));
        publisher.send(&Packet::Publish(publish.clone()));
        assert!(matches!(publisher.recv(), Packet::PubRec(r) if r.packet_id == pid(7)));
        publish.dup = true;
        publisher.send(&Packet::Publish(publish.clone()));
        assert!(matches!(publisher.recv(), Packet::PubRec(r) if r.packet_id == pid(7)));
        publisher.send(&Packet::PubRel(PubRel::new(pid(7))));
        match publisher.recv() {
            Packet::PubComp(comp) => {
                assert_eq!(comp.packet_id, pid(7));
                assert_eq!(comp.reason_code, ReasonCode::Success);
            }
            other => panic!("expected PUBCOMP, got {other:?}"),
        }
        assert_eq!(sub.expect_publish_acked().payload(), b"once");
        // After PUBCOMP the id is free: the same id is a new message.
        publish.dup = false;
        publish
            .content
            .set_payload(bytes::Bytes::from_static(b"again"));
        assert_eq!(publisher.publish(publish), ReasonCode::Success);
        assert_eq!(sub.expect_publish_acked().payload(), b"again");
        publisher.ping();
        sub.ping();
        sub.expect_silence(QUIET);
    }
}

#[test]
fn inbound_qos2_state_survives_reconnect_of_the_publisher() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut sub = RawClient::connected_clean(broker.addr(), protocol, "q2r-sub");
        sub.subscribe("q2r", QoS::AtLeastOnce);
        let id = format!("q2r-pub-{protocol:?}");
        let mut publisher =
            RawClient::connected(broker.addr(), persistent_connect(protocol, &id, 300));
        let mut publish = publish_packet("q2r", b"once", QoS::ExactlyOnce, Some(9));
        publisher.send(&Packet::Publish(publish.clone()));
        assert!(matches!(publisher.recv(), Packet::PubRec(r) if r.packet_id == pid(9)));
        publisher.drop_abruptly();
        assert_eq!(sub.expect_publish_acked().payload(), b"once");

        let (mut publisher, connack) =
            RawClient::connect(broker.addr(), persistent_connect(protocol, &id, 300));
        assert!(connack.session_present);
        publish.dup = true;
        publisher.send(&Packet::Publish(publish));
        assert!(matches!(publisher.recv(), Packet::PubRec(r) if r.packet_id == pid(9)));
        publisher.send(&Packet::PubRel(PubRel::new(pid(9))));
        match publisher.recv() {
            Packet::PubComp(comp) => assert_eq!(comp.reason_code, ReasonCode::Success),
            other => panic!("expected PUBCOMP, got {other:?}"),
        }
        sub.ping();
        sub.expect_silence(QUIET);
        publisher.disconnect();
    }
}

#[test]
fn pubrel_for_an_unknown_packet_id_gets_pubcomp_0x92() {
    let broker = TestBroker::start();
    let mut client = RawClient::connected_clean(broker.addr(), V5, "unknown-rel");
    client.send(&Packet::PubRel(PubRel::new(pid(42))));
    match client.recv() {
        Packet::PubComp(comp) => {
            assert_eq!(comp.packet_id, pid(42));
            assert_eq!(comp.reason_code, ReasonCode::PacketIdentifierNotFound);
        }
        other => panic!("expected PUBCOMP, got {other:?}"),
    }
}

#[test]
fn unknown_puback_is_ignored() {
    let broker = TestBroker::start();
    let mut client = RawClient::connected_clean(broker.addr(), V5, "stray-ack");
    client.send(&Packet::PubAck(codec::PubAck::new(pid(3))));
    client.send(&Packet::PubComp(codec::PubComp::new(pid(4))));
    client.ping();
}

#[test]
fn mqtt_3_1_clients_connect_and_exchange_messages() {
    let broker = TestBroker::start();
    let v31 = codec::ProtocolVersion::V3_1;
    let (mut sub, connack) =
        RawClient::connect(broker.addr(), persistent_connect(v31, "old-timer", 0));
    assert_eq!(connack.reason_code, ReasonCode::Success);
    assert!(!connack.session_present, "3.1 has no session present flag");
    sub.subscribe("v31/+", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "v31-pub");
    publisher.publish_simple("v31/x", b"hi", QoS::ExactlyOnce);
    let got = sub.expect_publish_acked();
    assert_eq!((got.qos, got.payload()), (QoS::AtLeastOnce, &b"hi"[..]));
    sub.disconnect();
}

#[test]
fn large_payloads_arrive_intact() {
    let broker = TestBroker::start();
    let mut sub = RawClient::connected_clean(broker.addr(), V311, "big-sub");
    sub.subscribe("big", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "big-pub");
    let payload: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
    for qos in [QoS::AtMostOnce, QoS::AtLeastOnce] {
        publisher.publish_simple("big", &payload, qos);
        let got = sub.expect_publish_acked();
        assert!(
            got.payload()[..] == payload[..],
            "payload intact at {qos:?}"
        );
    }
}
