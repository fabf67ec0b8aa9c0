//! Webhooks with the real broker and a real HTTP server (issue 49): a client's connect,
//! subscribe, publish, unsubscribe and disconnect reach the endpoint as events in that order,
//! publishes only on the configured topics, a QoS 0 copy for an offline session as a
//! `message.dropped`; an endpoint that fails is retried; `/metrics` counts the results.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use codec::{ProtocolVersion, QoS, ReasonCode};
use serde_json::Value;

use crate::client::{RawClient, persistent_connect};
use crate::harness::TestBroker;
use crate::http_auth_server::{Answer, HttpAuthServer};

const V5: ProtocolVersion = ProtocolVersion::V5;

/// A server that keeps every event it gets, answering with `status(n)` for its n-th POST.
fn recording_server(
    status: impl Fn(usize) -> u16 + Send + Sync + 'static,
) -> (HttpAuthServer, Arc<Mutex<Vec<Value>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let (kept, posts) = (Arc::clone(&events), Arc::new(Mutex::new(0)));
    let server = HttpAuthServer::start(move |_, body| {
        let mut n = posts.lock().unwrap();
        *n += 1;
        let status = status(*n);
        if status == 200 {
            let batch = body["events"].as_array().cloned().unwrap_or_default();
            kept.lock().unwrap().extend(batch);
        }
        Answer {
            status,
            delay: Duration::ZERO,
        }
    });
    (server, events)
}

/// Waits (at most 10 s) until an event satisfies `found`; every event so far.
fn wait_for(events: &Mutex<Vec<Value>>, found: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = events.lock().unwrap().clone();
        if now.iter().any(&found) {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "no such event within 10 s: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn config(url: &str, extra: &str) -> String {
    format!(
        "[[webhooks]]\nurl = \"{url}\"\nevents = [\"client.connected\", \"client.disconnected\", \
         \"session.subscribed\", \"session.unsubscribed\", \"message.published\", \
         \"message.dropped\"]\ntopics = [\"hooked/#\"]\ninclude_payload = true\n\
         batch_wait_ms = 20\nbackoff_ms = 20\n{extra}"
    )
}

#[test]
fn a_clients_life_reaches_the_webhook_in_order() {
    let (server, events) = recording_server(|_| 200);
    let broker = TestBroker::with_config(&config(&server.url("/events"), ""));
    let mut client = RawClient::connected_clean(broker.addr(), V5, "hooked");
    client.subscribe("hooked/#", QoS::AtLeastOnce);
    let reason = client.publish_simple("hooked/a", b"hi", QoS::AtLeastOnce);
    assert_eq!(reason, ReasonCode::Success);
    client.publish_simple("elsewhere/a", b"no", QoS::AtLeastOnce);
    client.unsubscribe("hooked/#");
    client.disconnect();
    let all = wait_for(&events, |e| e["event"] == "client.disconnected");
    let mine: Vec<&Value> = all.iter().filter(|e| e["clientid"] == "hooked").collect();
    let names: Vec<&str> = mine.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "client.connected",
            "session.subscribed",
            "message.published",
            "session.unsubscribed",
            "client.disconnected"
        ]
    );
    assert_eq!(mine[1]["filter"], "hooked/#");
    assert_eq!(mine[2]["topic"], "hooked/a");
    assert_eq!(mine[2]["payload_base64"], "aGk=");
    assert!(mine.iter().all(|e| e["at_ms"].as_u64().unwrap() > 0));
}

/// A delayed publish (`$delayed/`) is a `message.published` event when it fires, on its target
/// topic, naming the client that published it.
#[test]
fn a_delayed_message_is_published_as_an_event_when_it_fires() {
    let (server, events) = recording_server(|_| 200);
    let extra = "[delayed]\nenabled = true\n";
    let broker = TestBroker::with_config(&config(&server.url("/events"), extra));
    let mut client = RawClient::connected_clean(broker.addr(), V5, "later-pub");
    let sent = Instant::now();
    client.publish_simple("$delayed/1/hooked/later", b"hi", QoS::AtLeastOnce);
    let all = wait_for(&events, |e| e["event"] == "message.published");
    assert!(
        sent.elapsed() >= Duration::from_secs(1),
        "{:?}",
        sent.elapsed()
    );
    let published: Vec<&Value> = (all.iter())
        .filter(|e| e["event"] == "message.published")
        .collect();
    assert_eq!(published.len(), 1, "{all:?}");
    assert_eq!(published[0]["topic"], "hooked/later");
    assert_eq!(published[0]["clientid"], "later-pub");
}

#[test]
fn a_copy_dropped_for_an_offline_session_is_an_event() {
    let (server, events) = recording_server(|_| 200);
    let broker = TestBroker::with_config(&config(&server.url("/events"), ""));
    let mut away = RawClient::connected(broker.addr(), persistent_connect(V5, "away", 600));
    away.subscribe("hooked/#", QoS::AtMostOnce);
    away.disconnect();
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    publisher.publish_simple("hooked/b", b"x", QoS::AtLeastOnce);
    let all = wait_for(&events, |e| e["event"] == "message.dropped");
    let dropped = all
        .iter()
        .find(|e| e["event"] == "message.dropped")
        .unwrap();
    assert_eq!(dropped["reason"], "offline");
    assert_eq!(dropped["count"], 1);
}

#[test]
fn a_failing_endpoint_is_retried_and_counted() {
    // The first two POSTs fail: the batch gets through on its third attempt.
    let (server, events) = recording_server(|n| if n <= 2 { 503 } else { 200 });
    let broker = TestBroker::with_config(&format!(
        "{}{}",
        config(&server.url("/events"), ""),
        crate::ops::HTTP
    ));
    let client = RawClient::connected_clean(broker.addr(), V5, "retried");
    wait_for(&events, |e| e["clientid"] == "retried");
    drop(client);
    let scrape = || crate::ops::get(broker.http_addr(), "/metrics", "").body;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut metrics = scrape();
    // The answer reached the test before the webhook's thread counted it.
    while !metrics.contains("result=\"delivered\"} 1") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        metrics = scrape();
    }
    let failed = metrics
        .lines()
        .find(|l| l.starts_with("ringmq_webhook_failed_requests_total"))
        .unwrap();
    assert!(failed.ends_with(" 2"), "{failed}");
    assert!(metrics.contains("result=\"delivered\"} 1"), "{metrics}");
}
