//! `$SYS/broker/...` topics: published on the configured interval, matched only by filters that
//! name `$SYS`, never by `#` or `+`.

use std::collections::BTreeMap;

use codec::{Packet, QoS, ReasonCode};

use crate::client::{Event, RawClient, V5, V311, publish_packet};
use crate::harness::{TestBroker, wait_until};

const SYS_TOPICS: [&str; 12] = [
    "$SYS/broker/version",
    "$SYS/broker/uptime",
    "$SYS/broker/clients/connected",
    "$SYS/broker/clients/total",
    "$SYS/broker/messages/received",
    "$SYS/broker/messages/sent",
    "$SYS/broker/messages/dropped",
    "$SYS/broker/bytes/received",
    "$SYS/broker/bytes/sent",
    "$SYS/broker/subscriptions/count",
    "$SYS/broker/retained messages/count",
    "$SYS/broker/connections/open",
];

/// Collects `$SYS` values (latest per topic) until `done` holds.
fn collect_until(
    client: &mut RawClient,
    values: &mut BTreeMap<String, String>,
    done: impl Fn(&BTreeMap<String, String>) -> bool,
) {
    wait_until("$SYS values", || {
        if let Event::Packet(packet) = client.next_event(std::time::Duration::from_millis(100)) {
            match *packet {
                Packet::Publish(p) => {
                    let value = String::from_utf8_lossy(p.payload()).into_owned();
                    values.insert(p.topic().to_string(), value);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        done(values).then_some(())
    });
}

#[test]
fn sys_topics_are_published_and_hidden_from_wildcards() {
    let broker = TestBroker::with_config("[sys]\ninterval = 1\n");
    let mut everything = RawClient::connected_clean(broker.addr(), V311, "hash");
    everything.subscribe("#", QoS::AtMostOnce);
    everything.subscribe("+/broker/#", QoS::AtMostOnce);
    let mut sys = RawClient::connected_clean(broker.addr(), V5, "sys-reader");
    sys.subscribe("$SYS/#", QoS::AtMostOnce);

    let mut values = BTreeMap::new();
    collect_until(&mut sys, &mut values, |v| {
        SYS_TOPICS.iter().all(|t| v.contains_key(*t))
    });
    assert!(values["$SYS/broker/version"].starts_with("ringmq"));
    // Each shard refreshes its gauges on its own tick: the sums catch up within an interval.
    let at_least = |topic: &'static str, n: u64| {
        move |v: &BTreeMap<String, String>| v[topic].parse::<u64>().is_ok_and(|x| x >= n)
    };
    collect_until(
        &mut sys,
        &mut values,
        at_least("$SYS/broker/clients/connected", 2),
    );
    collect_until(
        &mut sys,
        &mut values,
        at_least("$SYS/broker/subscriptions/count", 3),
    );

    // The counters move: publish something and see messages/received grow.
    let before: u64 = values["$SYS/broker/messages/received"]
        .parse()
        .expect("a number");
    everything.publish_simple("plain/topic", b"x", QoS::AtMostOnce);
    assert_eq!(everything.expect_publish().topic(), "plain/topic");
    collect_until(&mut sys, &mut values, |v| {
        v["$SYS/broker/messages/received"]
            .parse::<u64>()
            .is_ok_and(|n| n > before)
    });

    // Two rounds of $SYS went out meanwhile; the "#" and "+/broker/#" subscriber saw none.
    everything.ping();
    everything.expect_silence(std::time::Duration::ZERO);
}

#[test]
fn sys_retained_values_reach_late_subscribers() {
    let broker = TestBroker::with_config("[sys]\ninterval = 1\n");
    let mut early = RawClient::connected_clean(broker.addr(), V5, "early");
    early.subscribe("$SYS/broker/version", QoS::AtMostOnce);
    early.expect_publish_on("$SYS/broker/version");
    let mut late = RawClient::connected_clean(broker.addr(), V5, "late");
    late.subscribe("$SYS/broker/+", QoS::AtMostOnce);
    late.ping();
    let got = late.expect_publish_on("$SYS/broker/version");
    assert!(got.retain, "retained for late subscribers");
}

/// Only the broker writes `$SYS`: a client's PUBLISH there is refused with 0x87 on MQTT 5.0,
/// acknowledged and dropped on 3.1.1, counted either way, and never served to `$SYS` readers.
#[test]
fn clients_cannot_publish_to_sys_topics() {
    let broker = TestBroker::with_config("[sys]\ninterval = 0\n");
    let mut reader = RawClient::connected_clean(broker.addr(), V5, "sys-reader");
    reader.subscribe("$SYS/#", QoS::AtMostOnce);
    let mut refused = 0;
    for (protocol, name) in [(V5, "forger-5"), (V311, "forger-3")] {
        let mut forger = RawClient::connected_clean(broker.addr(), protocol, name);
        for qos in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce] {
            let id = (qos != QoS::AtMostOnce).then(|| forger.next_packet_id());
            let mut forged = publish_packet("$SYS/broker/version", b"pwned 6.6.6", qos, id);
            forged.retain = true;
            let reason = forger.publish(forged);
            let expected = match (protocol, qos) {
                (V5, QoS::AtLeastOnce | QoS::ExactlyOnce) => ReasonCode::NotAuthorized,
                _ => ReasonCode::Success,
            };
            assert_eq!(reason, expected, "{protocol:?} {qos:?}");
            refused += 1;
        }
        let reason = forger.publish_simple("$SYS/broker/alert", b"fake", QoS::AtLeastOnce);
        assert!(matches!(
            reason,
            ReasonCode::NotAuthorized | ReasonCode::Success
        ));
        refused += 1;
    }
    broker.wait_for_metrics("refusals counted", |m| {
        m.publishes_not_authorized == refused
    });
    reader.ping();
    reader.expect_silence(std::time::Duration::ZERO);
    let mut late = RawClient::connected_clean(broker.addr(), V5, "sys-late");
    late.subscribe("$SYS/#", QoS::AtMostOnce);
    late.ping();
    late.expect_silence(std::time::Duration::ZERO);
}
