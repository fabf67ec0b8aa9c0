//! Retained messages: set, replace, clear, retain handling 0/1/2 and retain-as-published.

use codec::{Publish, QoS, ReasonCode, RetainHandling, SubscriptionOptions};

use crate::client::{QUIET, RawClient, V5, V311, publish_packet, subscribe_packet};
use crate::harness::TestBroker;

fn retained(topic: &str, payload: &[u8], qos: QoS, id: Option<u16>) -> Publish {
    Publish {
        retain: true,
        ..publish_packet(topic, payload, qos, id)
    }
}

/// Subscribes a fresh client to `filter` and returns the retained messages it gets (the PINGRESP
/// after the SUBACK fences them: they are sent before it).
fn retained_for(
    broker: &TestBroker,
    protocol: codec::ProtocolVersion,
    filter: &str,
) -> Vec<Publish> {
    let mut client = RawClient::connected_clean(broker.addr(), protocol, "retained-reader");
    client.subscribe(filter, QoS::ExactlyOnce);
    let got = client.drain_publishes(true);
    client.disconnect();
    got
}

#[test]
fn retained_message_is_set_replaced_and_cleared() {
    let broker = TestBroker::start();
    for protocol in [V311, V5] {
        let mut publisher = RawClient::connected_clean(broker.addr(), protocol, "ret-pub");
        let topic = format!("ret/{protocol:?}");
        publisher.publish(retained(&topic, b"first", QoS::AtLeastOnce, Some(1)));
        let got = retained_for(&broker, protocol, &topic);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].payload(), b"first");
        assert!(got[0].retain, "a retained message is sent with RETAIN set");
        assert_eq!(got[0].qos, QoS::AtLeastOnce);

        publisher.publish(retained(&topic, b"second", QoS::ExactlyOnce, Some(2)));
        let got = retained_for(&broker, protocol, "ret/+");
        assert_eq!(got.len(), 1, "replaced, not added: {got:?}");
        assert_eq!(got[0].payload(), b"second");
        assert_eq!(got[0].qos, QoS::ExactlyOnce);

        publisher.publish(retained(&topic, b"", QoS::AtMostOnce, None));
        publisher.ping();
        assert!(
            retained_for(&broker, protocol, "ret/#").is_empty(),
            "cleared"
        );
        publisher.disconnect();
    }
}

#[test]
fn retained_qos_is_capped_by_the_subscription() {
    let broker = TestBroker::start();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "cap-pub");
    publisher.publish(retained("cap", b"two", QoS::ExactlyOnce, Some(1)));
    let mut client = RawClient::connected_clean(broker.addr(), V5, "cap-sub");
    client.subscribe("cap", QoS::AtMostOnce);
    let got = client.expect_publish();
    assert_eq!(got.qos, QoS::AtMostOnce);
    assert!(got.retain);
}

#[test]
fn live_delivery_of_a_retained_publish_clears_retain_unless_retain_as_published() {
    let broker = TestBroker::start();
    let mut plain = RawClient::connected_clean(broker.addr(), V5, "rap-plain");
    plain.subscribe("rap", QoS::AtLeastOnce);
    let mut rap = RawClient::connected_clean(broker.addr(), V5, "rap-set");
    let options = SubscriptionOptions {
        qos: QoS::AtLeastOnce,
        retain_as_published: true,
        ..SubscriptionOptions::default()
    };
    rap.subscribe_with(subscribe_packet(1, "rap", options));
    let mut old = RawClient::connected_clean(broker.addr(), V311, "rap-311");
    old.subscribe("rap", QoS::AtLeastOnce);

    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "rap-pub");
    publisher.publish(retained("rap", b"live", QoS::AtLeastOnce, Some(1)));
    assert!(!plain.expect_publish_acked().retain);
    assert!(rap.expect_publish_acked().retain);
    assert!(
        !old.expect_publish_acked().retain,
        "3.1.1 live delivery has RETAIN 0"
    );
}

fn subscribe_with_handling(client: &mut RawClient, id: u16, handling: RetainHandling) {
    let options = SubscriptionOptions {
        qos: QoS::AtLeastOnce,
        retain_handling: handling,
        ..SubscriptionOptions::default()
    };
    let ack = client.subscribe_with(subscribe_packet(id, "rh/#", options));
    assert_eq!(ack.reason_codes, vec![ReasonCode::GrantedQoS1]);
}

/// Subscribes (again) with `handling` and counts the retained messages that precede PINGRESP.
fn retained_count(client: &mut RawClient, id: u16, handling: RetainHandling) -> usize {
    subscribe_with_handling(client, id, handling);
    let got = client.drain_publishes(true);
    assert!(
        got.iter().all(|p| p.retain),
        "retained messages have RETAIN set"
    );
    got.len()
}

#[test]
fn retain_handling_0_1_2() {
    let broker = TestBroker::start();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "rh-pub");
    publisher.publish(retained("rh/a", b"a", QoS::AtLeastOnce, Some(1)));
    publisher.publish(retained("rh/b", b"b", QoS::AtLeastOnce, Some(2)));

    let mut always = RawClient::connected_clean(broker.addr(), V5, "rh0");
    assert_eq!(
        retained_count(&mut always, 1, RetainHandling::SendAtSubscribe),
        2
    );
    assert_eq!(
        retained_count(&mut always, 2, RetainHandling::SendAtSubscribe),
        2,
        "0: sent again on every SUBSCRIBE"
    );

    let mut if_new = RawClient::connected_clean(broker.addr(), V5, "rh1");
    assert_eq!(retained_count(&mut if_new, 1, RetainHandling::SendIfNew), 2);
    assert_eq!(
        retained_count(&mut if_new, 2, RetainHandling::SendIfNew),
        0,
        "1: not sent when the subscription existed"
    );

    let mut never = RawClient::connected_clean(broker.addr(), V5, "rh2");
    assert_eq!(retained_count(&mut never, 1, RetainHandling::DoNotSend), 0);
    never.expect_silence(QUIET);
}

#[test]
fn retained_messages_are_not_sent_to_shared_subscriptions() {
    let broker = TestBroker::start();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "rs-pub");
    publisher.publish(retained("rs/t", b"kept", QoS::AtLeastOnce, Some(1)));
    let mut member = RawClient::connected_clean(broker.addr(), V5, "rs-member");
    member.subscribe("$share/g/rs/t", QoS::AtLeastOnce);
    member.ping();
    member.expect_silence(QUIET);
}

#[test]
fn retained_message_reaches_subscribers_on_every_shard() {
    let broker = TestBroker::start();
    let mut publisher = RawClient::connected_clean(broker.addr(), V311, "rall-pub");
    for round in 0..20 {
        let topic = format!("rall/{round}");
        publisher.publish(retained(&topic, b"r", QoS::AtLeastOnce, Some(1)));
        // A new connection each time: both shards serve some of them.
        let got = retained_for(&broker, V311, &topic);
        assert_eq!(got.len(), 1, "round {round}");
    }
}
