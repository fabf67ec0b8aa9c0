//! Delayed publish (`[delayed]`, EMQX's `$delayed/{seconds}/{topic}`, issue 49): the message
//! reaches `{topic}` once its delay ran out and not before, with its QoS, retain flag and a
//! shortened Message Expiry Interval; invalid forms are invalid topics; the ACL judges the
//! target; the bound refuses with 0x97; the admin API lists and cancels; off, `$delayed/...` is an
//! ordinary topic.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::{Duration, Instant};

use codec::{Packet, ProtocolVersion, QoS, ReasonCode};
use serde_json::Value;

use crate::client::{RawClient, V5, publish_packet};
use crate::harness::TestBroker;

pub const ON: &str = "[delayed]\nenabled = true\n";

/// Publishes `payload` to `$delayed/{seconds}/{target}` with `qos` and waits for the message
/// on `subscriber`: how long after the PUBLISH left it arrived, and the message.
fn published_after(
    publisher: &mut RawClient,
    subscriber: &mut RawClient,
    seconds: u64,
    target: &str,
    qos: QoS,
) -> (Duration, codec::Publish) {
    let sent = Instant::now();
    let reason = publisher.publish_simple(&format!("$delayed/{seconds}/{target}"), b"later", qos);
    assert!(!reason.is_error(), "{reason:?}");
    let got = subscriber.expect_publish_on(target);
    (sent.elapsed(), got)
}

#[test]
fn a_delayed_message_arrives_after_its_delay_and_not_before() {
    let broker = TestBroker::with_config(ON);
    let mut subscriber = RawClient::connected_clean(broker.addr(), V5, "sub");
    subscriber.subscribe("sensors/#", QoS::ExactlyOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    let (waited, got) = published_after(
        &mut publisher,
        &mut subscriber,
        2,
        "sensors/a",
        QoS::AtLeastOnce,
    );
    assert!(waited >= Duration::from_secs(2), "arrived after {waited:?}");
    assert_eq!((got.payload(), got.qos), (&b"later"[..], QoS::AtLeastOnce));
    subscriber.acknowledge(&got);

    // MQTT 3.1.1 publisher, QoS 2: the same.
    let mut old = RawClient::connected_clean(broker.addr(), ProtocolVersion::V3_1_1, "old");
    let (waited, got) =
        published_after(&mut old, &mut subscriber, 1, "sensors/b", QoS::ExactlyOnce);
    assert!(waited >= Duration::from_secs(1), "arrived after {waited:?}");
    assert_eq!(got.qos, QoS::ExactlyOnce);
    subscriber.acknowledge(&got);
    let figures = broker.wait_for_metrics("two published", |m| m.delayed_published == 2);
    assert_eq!(figures.delayed_pending, 0);
}

#[test]
fn nothing_arrives_while_the_delay_runs() {
    let broker = TestBroker::with_config(ON);
    let mut subscriber = RawClient::connected_clean(broker.addr(), V5, "sub");
    subscriber.subscribe("sensors/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    let sent = Instant::now();
    let reason = publisher.publish_simple("$delayed/3/sensors/slow", b"x", QoS::AtLeastOnce);
    assert_eq!(
        reason,
        ReasonCode::Success,
        "stored: no 0x10 for a delayed message"
    );
    subscriber.expect_silence(Duration::from_secs(2));
    assert!(broker.metrics().delayed_pending == 1);
    let got = subscriber.expect_publish_on("sensors/slow");
    assert!(
        sent.elapsed() >= Duration::from_secs(3),
        "{:?}",
        sent.elapsed()
    );
    subscriber.acknowledge(&got);
}

#[test]
fn the_retain_flag_is_kept_and_the_expiry_shortened() {
    let broker = TestBroker::with_config(ON);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    let mut retained = publish_packet("$delayed/1/plant/state", b"on", QoS::AtLeastOnce, Some(1));
    retained.retain = true;
    assert_eq!(publisher.publish(retained), ReasonCode::Success);
    let mut expiring = publish_packet("$delayed/2/plant/news", b"soon", QoS::AtLeastOnce, Some(2));
    expiring.properties.make_mut().message_expiry_interval = Some(100);
    assert_eq!(publisher.publish(expiring), ReasonCode::Success);
    let mut gone = publish_packet("$delayed/2/plant/old", b"stale", QoS::AtLeastOnce, Some(3));
    gone.properties.make_mut().message_expiry_interval = Some(1);
    assert_eq!(publisher.publish(gone), ReasonCode::Success);

    let mut subscriber = RawClient::connected_clean(broker.addr(), V5, "sub");
    subscriber.subscribe("plant/news", QoS::AtLeastOnce);
    subscriber.subscribe("plant/old", QoS::AtLeastOnce);
    let news = subscriber.expect_publish_on("plant/news");
    let left = news.properties.message_expiry_interval.unwrap();
    assert!(left <= 98, "expiry {left}: the wait is taken off");
    subscriber.acknowledge(&news);
    broker.wait_for_metrics("the expired one dropped", |m| m.delayed_pending == 0);
    subscriber.expect_silence(Duration::from_millis(300));

    // Retained when it fired: a later subscriber gets it.
    let mut late = RawClient::connected_clean(broker.addr(), V5, "late");
    late.subscribe("plant/state", QoS::AtLeastOnce);
    let state = late.expect_publish_on("plant/state");
    assert!(state.retain);
    assert_eq!(state.payload(), b"on");
}

#[test]
fn invalid_delayed_topics_are_invalid_topic_names() {
    let broker = TestBroker::with_config("[delayed]\nenabled = true\nmax_delay_seconds = 60\n");
    for topic in [
        "$delayed/soon/a",
        "$delayed/-1/a",
        "$delayed/61/a",
        "$delayed/5",
        "$delayed/5/",
    ] {
        let mut client = RawClient::connected_clean(broker.addr(), V5, "c");
        client.send(&Packet::Publish(publish_packet(
            topic,
            b"x",
            QoS::AtLeastOnce,
            Some(1),
        )));
        client.expect_disconnect(ReasonCode::TopicNameInvalid);
        let mut old = RawClient::connected_clean(broker.addr(), ProtocolVersion::V3_1_1, "o");
        old.send(&Packet::Publish(publish_packet(
            topic,
            b"x",
            QoS::AtMostOnce,
            None,
        )));
        old.expect_disconnect(ReasonCode::TopicNameInvalid);
    }
    assert_eq!(broker.metrics().delayed_pending, 0);
}

#[test]
fn the_acl_judges_the_target_topic() {
    let dir = tempfile::tempdir().unwrap();
    let acl = dir.path().join("acl");
    std::fs::write(
        &acl,
        "user alice\ntopic readwrite alice/#\ntopic read bob/#\n",
    )
    .unwrap();
    let broker = TestBroker::with_config(&format!(
        "{ON}[auth]\nacl_file = {:?}\n",
        acl.display().to_string()
    ));
    let mut subscriber = as_user(&broker, V5, "alice-sub");
    subscriber.subscribe("bob/#", QoS::AtLeastOnce);
    let mut alice = as_user(&broker, V5, "alice-1");
    let refused = alice.publish_simple("$delayed/1/bob/x", b"no", QoS::AtLeastOnce);
    assert_eq!(refused, ReasonCode::NotAuthorized);
    let allowed = alice.publish_simple("$delayed/1/alice/x", b"yes", QoS::AtLeastOnce);
    assert_eq!(allowed, ReasonCode::Success);
    let sys = alice.publish_simple("$delayed/1/$SYS/x", b"no", QoS::AtLeastOnce);
    assert_eq!(
        sys,
        ReasonCode::NotAuthorized,
        "only the broker writes $SYS"
    );
    let mut old = as_user(&broker, ProtocolVersion::V3_1_1, "alice-2");
    old.publish_simple("$delayed/1/bob/y", b"no", QoS::AtLeastOnce);
    let figures = broker.wait_for_metrics("one pending", |m| m.publishes_not_authorized == 3);
    assert_eq!(figures.delayed_pending, 1, "only the allowed one is kept");
    subscriber.expect_silence(Duration::from_millis(1500));
}

fn as_user(broker: &TestBroker, protocol: ProtocolVersion, id: &str) -> RawClient {
    RawClient::connected_as(broker.addr(), protocol, id, "alice")
}

#[test]
fn beyond_max_messages_a_delayed_publish_is_refused() {
    let broker = TestBroker::with_config("[delayed]\nenabled = true\nmax_messages = 2\n");
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    for n in 0..2 {
        let reason =
            publisher.publish_simple(&format!("$delayed/600/q/{n}"), b"x", QoS::AtLeastOnce);
        assert_eq!(reason, ReasonCode::Success);
    }
    let full = publisher.publish_simple("$delayed/600/q/2", b"x", QoS::AtLeastOnce);
    assert_eq!(full, ReasonCode::QuotaExceeded);
    let full = publisher.publish_simple("$delayed/600/q/3", b"x", QoS::ExactlyOnce);
    assert_eq!(full, ReasonCode::QuotaExceeded);
    let mut old = RawClient::connected_clean(broker.addr(), ProtocolVersion::V3_1_1, "old");
    assert_eq!(
        old.publish_simple("$delayed/600/q/4", b"x", QoS::AtLeastOnce),
        ReasonCode::Success,
        "3.1.1: a plain PUBACK, the message dropped"
    );
    let figures = broker.wait_for_metrics("refused", |m| m.delayed_refused == 3);
    assert_eq!(figures.delayed_pending, 2);
    assert_eq!(figures.messages_dropped, 1, "the 3.1.1 one, told nothing");
}

#[test]
fn a_qos_2_publish_refused_at_the_bound_holds_no_packet_id() {
    let broker = TestBroker::with_config(
        "[delayed]\nenabled = true\nmax_messages = 1\n[limits]\nreceive_maximum = 2\n",
    );
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    let kept = publisher.publish_simple("$delayed/600/q/kept", b"x", QoS::ExactlyOnce);
    assert_eq!(kept, ReasonCode::Success);
    // Each refused one ends its exchange at the PUBREC: were its id kept awaiting a PUBREL,
    // the third would be over Receive Maximum and close the connection.
    for n in 0..4 {
        let id = publisher.next_packet_id();
        let topic = format!("$delayed/600/q/{n}");
        publisher.send(&Packet::Publish(publish_packet(
            &topic,
            b"x",
            QoS::ExactlyOnce,
            Some(id),
        )));
        let rec = publisher.recv_where("PUBREC", |p| match p {
            Packet::PubRec(rec) if rec.packet_id.get() == id => Some(rec.reason_code),
            _ => None,
        });
        assert_eq!(rec, ReasonCode::QuotaExceeded, "message {n}");
    }
    publisher.ping();
}

#[test]
fn the_delayed_figures_are_in_metrics() {
    let broker = TestBroker::with_config(&format!(
        "[delayed]\nenabled = true\nmax_messages = 1\n{}",
        crate::ops::HTTP
    ));
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    publisher.publish_simple("$delayed/600/m/kept", b"x", QoS::AtLeastOnce);
    let refused = publisher.publish_simple("$delayed/600/m/refused", b"x", QoS::AtLeastOnce);
    assert_eq!(refused, ReasonCode::QuotaExceeded);
    let mut old = RawClient::connected_clean(broker.addr(), ProtocolVersion::V3_1_1, "old");
    old.publish_simple("$delayed/600/m/dropped", b"x", QoS::AtLeastOnce);
    let scrape = crate::ops::scrape_until(&broker, "two refused", |s| {
        s.value("ringmq_delayed_refused_total", &[]) == Some(2.0)
    });
    assert_eq!(scrape.value("ringmq_delayed_pending", &[]), Some(1.0));
    assert_eq!(
        scrape.value("ringmq_delayed_published_total", &[]),
        Some(0.0)
    );
    let full = scrape.value("ringmq_message_drops_total", &[("reason", "delayed_full")]);
    assert_eq!(full, Some(1.0));
}

#[test]
fn the_admin_api_lists_and_cancels_pending_messages() {
    let broker = TestBroker::with_config(ON);
    let mut subscriber = RawClient::connected_clean(broker.addr(), V5, "sub");
    subscriber.subscribe("jobs/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub-1");
    publisher.publish_simple("$delayed/2/jobs/cancelled", b"12345", QoS::AtLeastOnce);
    publisher.publish_simple("$delayed/2/jobs/kept", b"x", QoS::ExactlyOnce);
    publisher.publish_simple("$delayed/600/jobs/far", b"x", QoS::AtMostOnce);
    broker.wait_for_metrics("three pending", |m| m.delayed_pending == 3);

    let first = call(&broker, "GET", "/api/v1/delayed?limit=2");
    let page = first.1["delayed"].as_array().unwrap().clone();
    assert_eq!((first.0, page.len()), (200, 2), "{first:?}");
    let next = first.1["next"].as_u64().unwrap();
    let rest = call(&broker, "GET", &format!("/api/v1/delayed?after={next}"));
    let mut all = page;
    all.extend(rest.1["delayed"].as_array().unwrap().iter().cloned());
    assert_eq!(all.len(), 3, "{rest:?}");
    let cancelled = all.iter().find(|d| d["topic"] == "jobs/cancelled").unwrap();
    assert_eq!(cancelled["qos"], 1);
    assert_eq!(cancelled["payload_bytes"], 5);
    assert_eq!(cancelled["publisher"], "pub-1");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(cancelled["due_unix_ms"].as_u64().unwrap() > now_ms - 2_000);

    let id = cancelled["id"].as_u64().unwrap();
    let (status, body) = call(&broker, "DELETE", &format!("/api/v1/delayed/{id}"));
    assert_eq!(status, 200, "{body}");
    let (again, _) = call(&broker, "DELETE", &format!("/api/v1/delayed/{id}"));
    assert_eq!(again, 404);
    assert_eq!(call(&broker, "DELETE", "/api/v1/delayed/nonsense").0, 400);

    let kept = subscriber.expect_publish_on("jobs/kept");
    subscriber.acknowledge(&kept);
    subscriber.expect_silence(Duration::from_millis(1500));
    assert_eq!(broker.metrics().delayed_pending, 1, "the far one");
}

/// An admin API request (no body) answered by `broker`: status and JSON body.
pub fn call(broker: &TestBroker, method: &str, path_and_query: &str) -> (u16, Value) {
    crate::admin::call(broker, method, path_and_query, "")
}

#[test]
fn off_a_delayed_topic_is_an_ordinary_topic() {
    let broker = TestBroker::start();
    let mut subscriber = RawClient::connected_clean(broker.addr(), V5, "sub");
    subscriber.subscribe("$delayed/#", QoS::AtLeastOnce);
    subscriber.subscribe("sensors/#", QoS::AtLeastOnce);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
    let sent = Instant::now();
    publisher.publish_simple("$delayed/5/sensors/a", b"now", QoS::AtLeastOnce);
    let got = subscriber.expect_publish();
    assert_eq!(got.topic(), "$delayed/5/sensors/a");
    assert!(sent.elapsed() < Duration::from_secs(5), "not delayed");
    // Malformed forms are ordinary topics too.
    publisher.publish_simple("$delayed/soon/x", b"now", QoS::AtLeastOnce);
    assert_eq!(subscriber.expect_publish().topic(), "$delayed/soon/x");
    assert_eq!(broker.metrics().delayed_pending, 0);
}
