//! Session takeover: the same client id connects again while its old connection is open, on the
//! same shard or another one.

use codec::{QoS, ReasonCode};

use crate::client::{RawClient, V5, V311, connect_packet};
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
    let mut persistent = connect_packet(V5, "wipe", false);
    persistent.properties.session_expiry_interval = Some(300);
    let mut old = RawClient::connected(broker.addr(), persistent);
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
    let mut connect = connect_packet(protocol, "roamer", false);
    if protocol.is_v5() {
        connect.properties.session_expiry_interval = Some(300);
    }
    let mut current = RawClient::connected(addr, connect.clone());
    current.subscribe("roam/t", QoS::AtLeastOnce);
    let mut shard = shard_of(&broker, &mut current);
    let (mut crossed, mut same) = (0, 0);
    for round in 0..40 {
        let pending = format!("pending-{round}");
        publisher.publish_simple("roam/t", pending.as_bytes(), QoS::AtLeastOnce);
        let first = current.expect_publish();
        assert_eq!(first.payload, pending.as_bytes());
        assert!(!first.dup);

        let (mut next, connack) = RawClient::connect(addr, connect.clone());
        assert_eq!(connack.reason_code, ReasonCode::Success, "round {round}");
        assert!(connack.session_present, "round {round}: session kept");
        current.expect_disconnect(ReasonCode::SessionTakenOver);

        let again = next.expect_publish();
        assert_eq!(
            again.payload,
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
            delivered.payload,
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
