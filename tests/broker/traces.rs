//! Live traces (docs/operations.md, "Traces") with real clients, through the admin API: a
//! trace of a client id shows that client's packets both ways and nobody else's, also for a
//! client connected before the trace began; a topic trace shows every PUBLISH on its topic;
//! the live view reads on from an offset; the size bound counts what it cannot keep; a stopped
//! trace writes nothing more.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use codec::QoS;
use serde_json::{Value, json};

use crate::client::{RawClient, V5};
use crate::harness::{TestBroker, wait_until};

fn call(broker: &TestBroker, method: &str, path: &str, body: &Value) -> (u16, Value) {
    crate::admin::call(broker, method, path, &body.to_string())
}

fn start(broker: &TestBroker, spec: Value) -> u64 {
    let (status, answer) = call(broker, "POST", "/api/v1/traces", &spec);
    assert_eq!(status, 200, "{answer}");
    answer["id"].as_u64().unwrap()
}

fn read(broker: &TestBroker, id: u64, after: u64) -> Value {
    let (status, answer) = call(
        broker,
        "GET",
        &format!("/api/v1/traces/{id}?after={after}"),
        &json!({}),
    );
    assert_eq!(status, 200, "{answer}");
    answer
}

/// The trace's log once it holds a line containing `needle`.
fn log_with(broker: &TestBroker, id: u64, needle: &str) -> String {
    wait_until(needle, || {
        let log = read(broker, id, 0)["log"].as_str().unwrap().to_owned();
        log.contains(needle).then_some(log)
    })
}

#[test]
fn a_client_trace_shows_its_packets_both_ways_and_nobody_elses() {
    let broker = TestBroker::with_config("[runtime]\nshards = 2\n");
    let mut early = RawClient::connected_clean(broker.addr(), V5, "early");
    let id = start(&broker, json!({"client_id": "traced", "payload_bytes": 4}));
    let late_id = start(&broker, json!({"client_id": "early"}));
    let mut traced = RawClient::connected_clean(broker.addr(), V5, "traced");
    let mut other = RawClient::connected_clean(broker.addr(), V5, "other");
    traced.subscribe("t/#", QoS::AtLeastOnce);
    other.subscribe("t/#", QoS::AtLeastOnce);
    traced.publish_simple("t/a", b"hello", QoS::AtLeastOnce);
    other.publish_simple("t/b", b"world", QoS::AtLeastOnce);
    for _ in 0..2 {
        let publish = traced.expect_publish();
        traced.acknowledge(&publish);
        let publish = other.expect_publish();
        other.acknowledge(&publish);
    }
    early.ping();

    // The traced client's PUBACKs are its last packets read: the log is complete once one is in.
    let log = log_with(&broker, id, "in  traced PUBACK id=");
    for needle in [
        "in  traced CONNECT client_id=traced",
        "out traced CONNACK session_present=0 reason=Success",
        "in  traced SUBSCRIBE id=1 t/#@1",
        "out traced SUBACK id=1",
        "in  traced PUBLISH id=2 topic=t/a qos=1 dup=0 retain=0 payload=5B first=68656c6c",
        "out traced PUBACK id=2",
        "topic=t/b qos=1",
        "in  traced PUBACK id=",
    ] {
        assert!(log.contains(needle), "no `{needle}` in\n{log}");
    }
    assert!(!log.contains(" other "), "another client's packets:\n{log}");
    let early_log = log_with(&broker, late_id, "in  early PINGREQ");
    assert!(early_log.contains("out early PINGRESP"), "{early_log}");

    // The live view reads on from where it was; a stopped trace writes nothing more.
    let first = read(&broker, id, 0);
    let next = first["next"].as_u64().unwrap();
    traced.ping();
    let more = log_with(&broker, id, "in  traced PINGREQ");
    assert!(more.len() as u64 > next);
    let tail = read(&broker, id, next);
    assert!(
        tail["log"]
            .as_str()
            .unwrap()
            .starts_with(|c: char| c.is_ascii_digit())
    );
    assert!(tail["log"].as_str().unwrap().contains("PINGREQ"));
    let (status, _) = call(
        &broker,
        "POST",
        &format!("/api/v1/traces/{id}/stop"),
        &json!({}),
    );
    assert_eq!(status, 200);
    let stopped = read(&broker, id, 0);
    assert_eq!(stopped["running"], false);
    traced.ping();
    early.ping();
    assert_eq!(
        read(&broker, id, 0)["lines"],
        stopped["lines"],
        "nothing after the stop"
    );
}

#[test]
fn a_topic_trace_shows_every_publish_on_its_topic_and_the_bound_counts_the_rest() {
    let broker = TestBroker::with_config("[runtime]\nshards = 2\n");
    let id = start(&broker, json!({"topic": "room/+/temp", "max_bytes": 300}));
    let mut sub = RawClient::connected_clean(broker.addr(), V5, "watcher");
    sub.subscribe("room/#", QoS::AtMostOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "sensor");
    publisher.publish_simple("room/1/humidity", b"40", QoS::AtMostOnce);
    publisher.publish_simple("room/1/temp", b"21", QoS::AtMostOnce);
    for _ in 0..2 {
        sub.expect_publish();
    }
    let log = log_with(&broker, id, "out watcher PUBLISH");
    assert!(
        log.contains("in  sensor PUBLISH topic=room/1/temp"),
        "{log}"
    );
    assert!(!log.contains("humidity"), "{log}");
    for n in 0..20 {
        publisher.publish_simple("room/2/temp", &[n], QoS::AtMostOnce);
        sub.expect_publish();
    }
    let view = read(&broker, id, 0);
    assert!(view["bytes"].as_u64().unwrap() <= 300, "{view}");
    assert!(view["dropped_lines"].as_u64().unwrap() > 0, "{view}");
    let (status, answer) = call(
        &broker,
        "POST",
        "/api/v1/traces",
        &json!({"topic": "a/#", "username": "u"}),
    );
    assert_eq!(status, 400, "{answer}");
    let (status, _) = call(
        &broker,
        "DELETE",
        &format!("/api/v1/traces/{id}"),
        &json!({}),
    );
    assert_eq!(status, 200);
    let (status, _) = call(&broker, "GET", &format!("/api/v1/traces/{id}"), &json!({}));
    assert_eq!(status, 404);
}
