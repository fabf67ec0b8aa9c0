//! Overload mode (`[overload]`): while the broker's resident memory is above
//! `memory_high_bytes`, new connections are closed at accept (no CONNACK) and counted, while
//! connected clients are served as before; once the memory is below the low mark (here: after a
//! reload raised the thresholds far above it) new connections are accepted again.

use codec::{Packet, QoS, ReasonCode};

use crate::client::{Event, READ_TIMEOUT, RawClient, V5, connect_packet};
use crate::harness::{TestBroker, wait_until};

/// Whether a new client gets its CONNACK (`false`: closed without one).
fn connects(broker: &TestBroker, id: &str) -> bool {
    let mut client = RawClient::open(broker.addr(), V5);
    client.send(&Packet::from(connect_packet(V5, id, true)));
    match client.next_event(READ_TIMEOUT) {
        Event::Packet(packet) => match *packet {
            Packet::ConnAck(ack) => ack.reason_code == ReasonCode::Success,
            other => panic!("expected CONNACK, got {other:?}"),
        },
        Event::Closed => false,
        Event::Timeout => panic!("neither a CONNACK nor a close"),
    }
}

#[test]
fn overload_refuses_new_connections_and_keeps_serving_connected_clients() {
    let broker = TestBroker::start();
    let mut member = RawClient::connected_clean(broker.addr(), V5, "member");
    member.subscribe("load/#", QoS::AtLeastOnce);

    // Any broker's resident memory is above one byte; the low mark is 90% of it: 0.
    broker.apply_reloadable("[overload]\nmemory_high_bytes = 1\n");
    assert!(!connects(&broker, "newcomer"), "refused in overload mode");
    assert!(!connects(&broker, "another"), "still refused");
    assert!(broker.metrics().refused_overload >= 2);
    member.publish_simple("load/1", b"still served", QoS::AtLeastOnce);
    assert_eq!(member.expect_publish_acked().payload(), b"still served");

    // Far above the resident memory now: below the new low mark, so accepting resumes.
    broker.apply_reloadable("[overload]\nmemory_high_bytes = 1099511627776\n");
    wait_until("a new connection accepted again", || {
        connects(&broker, "welcome").then_some(())
    });
    member.publish_simple("load/2", b"after", QoS::AtLeastOnce);
    assert_eq!(member.expect_publish_acked().payload(), b"after");
}

#[test]
fn overload_mode_off_by_default_accepts_everyone() {
    let broker = TestBroker::start();
    for i in 0..5 {
        assert!(connects(&broker, &format!("client-{i}")));
    }
    assert_eq!(broker.metrics().refused_overload, 0);
}
