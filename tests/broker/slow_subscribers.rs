//! Slow subscribers (`[slow_subscribers]`, docs/operations.md) with real clients: one that
//! acknowledges each QoS 1 message late is ranked by latency, one that reads nothing is ranked
//! by drops and by queue depth, one that keeps up is in no ranking; the admin API and
//! `/metrics` agree.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::Duration;

use codec::QoS;
use ringmq::admin::{AdminRequest, AdminResponse};
use serde_json::Value;

use crate::client::{RawClient, V5};
use crate::harness::TestBroker;
use crate::ops::scrape_until;

/// Messages published; the sleeper holds 2 in flight and 3 queued, so it loses the rest.
const MESSAGES: usize = 10;
const LATE: Duration = Duration::from_millis(250);
/// The longest a test waits for a figure that must come.
const GUARD: Duration = Duration::from_secs(10);

fn slow_subscribers(broker: &TestBroker) -> Value {
    let request = AdminRequest {
        method: "GET",
        path: "/api/v1/slow_subscribers",
        query: &[],
        body: b"",
    };
    let AdminResponse { status, body } = broker.admin().route(&request).unwrap();
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn ids(list: &Value) -> Vec<&str> {
    (list.as_array().unwrap().iter())
        .map(|row| row["client_id"].as_str().unwrap())
        .collect()
}

#[test]
fn late_acknowledgers_and_non_readers_are_ranked_and_keepers_up_are_not() {
    let broker = TestBroker::with_config(
        "[runtime]\nshards = 2\n[slow_subscribers]\nthreshold_ms = 100\ntop = 3\n\
         [limits]\nmax_inflight_outbound = 2\n[queues]\nmax_queued_messages = 3\n\
         [sys]\ninterval = 1\n[http]\nbind = \"127.0.0.1:0\"\n",
    );
    let mut fast = RawClient::connected_clean(broker.addr(), V5, "keeps-up");
    let mut late = RawClient::connected_clean(broker.addr(), V5, "acks-late");
    let mut sleeper = RawClient::connected_clean(broker.addr(), V5, "reads-nothing");
    for client in [&mut fast, &mut late, &mut sleeper] {
        client.subscribe("slow/#", QoS::AtLeastOnce);
    }
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "slow-pub");
    // One at a time: the two that read get every message; the sleeper's window (2) and
    // queue (3) fill, and the rest is dropped for it.
    for n in 0..MESSAGES {
        publisher.publish_simple("slow/t", &[n as u8], QoS::AtLeastOnce);
        let publish = fast.expect_publish();
        fast.acknowledge(&publish);
        let publish = late.expect_publish();
        std::thread::sleep(LATE);
        late.acknowledge(&publish);
    }
    // A fence: the late client's last PUBACK has been handled once its PINGRESP is back.
    late.ping();

    let report = slow_subscribers(&broker);
    assert_eq!(ids(&report["by_latency"]), ["acks-late"], "{report}");
    let slowest = &report["by_latency"][0];
    assert!(
        slowest["max_latency_ms"].as_u64().unwrap() >= 100,
        "{report}"
    );
    assert!(
        slowest["slow_deliveries"].as_u64().unwrap() >= 1,
        "{report}"
    );
    assert_eq!(ids(&report["by_drops"]), ["reads-nothing"], "{report}");
    assert_eq!(
        report["by_drops"][0]["dropped"],
        (MESSAGES - 5) as u64,
        "{report}"
    );
    assert_eq!(ids(&report["by_queue"]), ["reads-nothing"], "{report}");
    assert_eq!(report["by_queue"][0]["queued"], 3, "{report}");
    assert_eq!(report["by_queue"][0]["inflight"], 2, "{report}");

    let scrape = scrape_until(&broker, "the rankings in /metrics", |s| {
        s.value(
            "ringmq_slow_subscriber_dropped",
            &[("rank", "1"), ("client_id", "reads-nothing")],
        )
        .is_some()
    });
    let latency = scrape.value(
        "ringmq_slow_subscriber_latency_seconds",
        &[("rank", "1"), ("client_id", "acks-late")],
    );
    assert!(latency.unwrap() >= 0.1, "{latency:?}");
    let queued = scrape.value(
        "ringmq_slow_subscriber_queued",
        &[("rank", "1"), ("client_id", "reads-nothing")],
    );
    assert_eq!(queued, Some(3.0));
    assert!(
        !scrape
            .samples
            .iter()
            .any(|s| s.labels.iter().any(|(_, v)| v == "keeps-up")),
        "a subscriber that keeps up is in no ranking"
    );
    drop(sleeper);
}

/// The queue ranking keeps the deepest `top` of many queues (every shard's), ties by client id.
#[test]
fn the_queue_ranking_keeps_the_deepest_queues_ties_by_client_id() {
    let broker = TestBroker::with_config(
        "[runtime]\nshards = 2\n[slow_subscribers]\ntop = 2\n[http]\nbind = \"127.0.0.1:0\"\n",
    );
    let depths = [("q-a", 1), ("q-b", 3), ("q-c", 3), ("q-d", 2), ("q-e", 0)];
    for (id, _) in depths {
        let mut client = RawClient::connected(
            broker.addr(),
            crate::client::persistent_connect(V5, id, 600),
        );
        client.subscribe(&format!("depth/{id}"), QoS::AtLeastOnce);
        client.disconnect();
    }
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "depth-pub");
    for (id, depth) in depths {
        for n in 0..depth {
            publisher.publish_simple(&format!("depth/{id}"), &[n], QoS::AtLeastOnce);
        }
    }
    // Copies for sessions on the other shard reach it through its mailbox: wait (bounded)
    // until every queue is counted.
    let report = crate::harness::wait_until_within(GUARD, "every queue counted", || {
        let report = slow_subscribers(&broker);
        (report["by_queue"][1]["queued"] == 3).then_some(report)
    });
    assert_eq!(ids(&report["by_queue"]), ["q-b", "q-c"], "{report}");
    assert_eq!(report["by_queue"][0]["queued"], 3, "{report}");
    assert_eq!(report["by_queue"][1]["queued"], 3, "{report}");
}
