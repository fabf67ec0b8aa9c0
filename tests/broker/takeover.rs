//! Session takeover: the same client id connects again while its old connection is open, on the
//! same shard or another one.

use codec::{QoS, ReasonCode};

use crate::client::{RawClient, V5, V311, connect_packet, persistent_connect};
use crate::harness::TestBroker;

/// Which shard `client`'s connection lives on: the one whose received-bytes counter moves when
/// only this client sends.
fn shard_of(broker: &TestBroker, client: &mut RawClient) -> usize {
    client.ping();
    let before = broker.bytes_received_per_shard();
    client.ping();
    let after = broker.bytes_received_per_shard();
    let moved: Vec<usize> = (0..before.len())
        .filter(|&i| before[i] != after[i])
        .collect();
    assert_eq!(moved.len(), 1, "one shard received the PINGREQ: {moved:?}");
    moved[0]
}

#[test]
fn takeover_disconnects_the_old_connection() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut old = RawClient::connected_clean(broker.addr(), protocol, "dup-id");
        let mut new = RawClient::connected_clean(broker.addr(), protocol, "dup-id");
        old.expect_disconnect(ReasonCode::SessionTakenOver);
        new.ping();
    }
}

#[test]
fn takeover_with_clean_start_discards_the_session() {
    let broker = TestBroker::start();
    let mut old = RawClient::connected(broker.addr(), persistent_connect(V5, "wipe", 300));
    old.subscribe("wipe/t", QoS::AtLeastOnce);
    let (mut new, connack) = RawClient::connect(broker.addr(), connect_packet(V5, "wipe", true));
    assert_eq!(connack.reason_code, ReasonCode::Success);
    assert!(!connack.session_present);
    old.expect_disconnect(ReasonCode::SessionTakenOver);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "wipe-pub");
    assert_eq!(
        publisher.publish_simple("wipe/t", b"x", QoS::AtLeastOnce),
        ReasonCode::NoMatchingSubscribers,
        "the old session's subscription is gone"
    );
    new.ping();
}

/// Takes the session over repeatedly until takeovers both within a shard and across shards have
/// happened; each time an unacknowledged message is resent with DUP and the subscription works.
fn roam(protocol: codec::ProtocolVersion) {
    let broker = TestBroker::start();
    let addr = broker.addr();
    let mut publisher = RawClient::connected_clean(addr, V5, "roam-pub");
    let connect = persistent_connect(protocol, "roamer", 300);
    let mut current = RawClient::connected(addr, connect.clone());
    current.subscribe("roam/t", QoS::AtLeastOnce);
    let mut shard = shard_of(&broker, &mut current);
    let (mut crossed, mut same) = (0, 0);
    for round in 0..40 {
        let pending = format!("pending-{round}");
        publisher.publish_simple("roam/t", pending.as_bytes(), QoS::AtLeastOnce);
        let first = current.expect_publish();
        assert_eq!(first.payload(), pending.as_bytes());
        assert!(!first.dup);

        let (mut next, connack) = RawClient::connect(addr, connect.clone());
        assert_eq!(connack.reason_code, ReasonCode::Success, "round {round}");
        assert!(connack.session_present, "round {round}: session kept");
        current.expect_disconnect(ReasonCode::SessionTakenOver);

        let again = next.expect_publish();
        assert_eq!(
            again.payload(),
            pending.as_bytes(),
            "round {round}: redelivered"
        );
        assert!(again.dup, "round {round}: redelivery has DUP set");
        assert_eq!(
            again.packet_id, first.packet_id,
            "round {round}: same packet id"
        );
        next.acknowledge(&again);

        let live = format!("live-{round}");
        publisher.publish_simple("roam/t", live.as_bytes(), QoS::AtLeastOnce);
        let delivered = next.expect_publish_acked();
        assert_eq!(
            delivered.payload(),
            live.as_bytes(),
            "round {round}: subscription kept"
        );
        assert!(!delivered.dup);

        let next_shard = shard_of(&broker, &mut next);
        if next_shard == shard {
            same += 1;
        } else {
            crossed += 1;
        }
        current = next;
        shard = next_shard;
        if round >= 9 && crossed >= 2 && same >= 1 {
            break;
        }
    }
    assert!(crossed >= 2, "takeovers across shards happened ({crossed})");
    assert!(same >= 1, "takeovers within a shard happened ({same})");
}

#[test]
fn repeated_takeover_across_shards_keeps_session_state_v5() {
    roam(V5);
}

#[test]
fn repeated_takeover_across_shards_keeps_session_state_v311() {
    roam(V311);
}

/// A client may send packets right behind its CONNECT without waiting for CONNACK, also while
/// its session is handed over from another shard.
#[test]
fn packets_pipelined_behind_connect_are_served_after_a_takeover() {
    let broker = TestBroker::start();
    let connect = persistent_connect(V5, "pipeliner", 300);
    let mut current = RawClient::connected(broker.addr(), connect.clone());
    for round in 0..12u16 {
        let mut next = RawClient::open(broker.addr(), V5);
        let mut burst = bytes::BytesMut::new();
        let packets = [
            codec::Packet::from(connect.clone()),
            codec::Packet::Subscribe(crate::client::subscribe_packet(
                round + 1,
                "pipe/t",
                crate::client::qos_options(QoS::AtLeastOnce),
            )),
            codec::Packet::PingReq(codec::PingReq),
        ];
        for packet in &packets {
            codec::encode(packet, V5, &mut burst).expect("encodes");
        }
        next.send_raw(&burst);
        let connack = next.expect_connack();
        assert_eq!(connack.reason_code, ReasonCode::Success, "round {round}");
        // SUBACK and PINGRESP, in either order (SUBACK waits for the subscription to apply).
        let suback = next.recv_where("SUBACK", |p| match p {
            codec::Packet::SubAck(ack) => Some(ack.packet_id.get()),
            _ => None,
        });
        assert_eq!(suback, round + 1);
        next.recv_where("PINGRESP", |p| {
            matches!(p, codec::Packet::PingResp(_)).then_some(())
        });
        current.expect_closed();
        current = next;
    }
}
