//! Delayed publish with `[persistence]` (issue 49): pending `$delayed/` messages survive a
//! restart and a `kill -9` (every commit synced) and fire after it, those due while the broker
//! was down at once; a cancelled one stays cancelled; ids and the admin list carry over.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use codec::{ProtocolVersion, QoS, ReasonCode};

use crate::client::{RawClient, persistent_connect, publish_packet};
use crate::delayed::{ON, call};
use crate::harness::TestBroker;
use crate::persistence::{ENGINES, store_config};
use crate::process::BrokerProcess;

const V5: ProtocolVersion = ProtocolVersion::V5;

/// The ids of the pending delayed messages, with their target topics.
fn pending(broker: &TestBroker) -> Vec<(u64, String)> {
    let (status, body) = call(broker, "GET", "/api/v1/delayed");
    assert_eq!(status, 200, "{body}");
    (body["delayed"].as_array().unwrap().iter())
        .map(|d| {
            (
                d["id"].as_u64().unwrap(),
                d["topic"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn pending_delayed_messages_survive_a_restart_and_fire_after_it() {
    for engine in ENGINES {
        let dir = tempfile::Builder::new()
            .prefix("ringmq-delayed-")
            .tempdir()
            .unwrap();
        let config = format!("{ON}{}", store_config(engine, dir.path()));
        let published = Instant::now();
        let before = {
            let broker = TestBroker::with_store(&config);
            let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600));
            sub.subscribe("later/#", QoS::ExactlyOnce);
            sub.disconnect();
            let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
            for (topic, qos) in [
                ("$delayed/1/later/while-down", QoS::AtLeastOnce),
                ("$delayed/4/later/after", QoS::ExactlyOnce),
                ("$delayed/600/later/far", QoS::AtLeastOnce),
                ("$delayed/3/later/cancelled", QoS::AtLeastOnce),
            ] {
                let reason = publisher.publish_simple(topic, topic.as_bytes(), qos);
                assert_eq!(reason, ReasonCode::Success, "{engine}: {topic}");
            }
            // Its Message Expiry Interval runs out while the broker is down: never published.
            let id = publisher.next_packet_id();
            let topic = "$delayed/1/later/expired";
            let mut expiring = publish_packet(topic, b"stale", QoS::AtLeastOnce, Some(id));
            expiring.properties.make_mut().message_expiry_interval = Some(1);
            assert_eq!(publisher.publish(expiring), ReasonCode::Success);
            let listed = pending(&broker);
            let cancelled = listed
                .iter()
                .find(|(_, t)| t == "later/cancelled")
                .unwrap()
                .0;
            let (status, _) = call(&broker, "DELETE", &format!("/api/v1/delayed/{cancelled}"));
            assert_eq!(status, 200);
            listed
                .into_iter()
                .filter(|(id, t)| *id != cancelled && t != "later/expired")
                .collect::<Vec<_>>()
        };
        std::thread::sleep(Duration::from_millis(1500));
        let broker = TestBroker::with_store(&config);
        // The one due while the broker was down fires as soon as it runs.
        broker.wait_for_metrics("one fired, one expired at start", |m| {
            m.delayed_published == 1 && m.delayed_pending == 2
        });
        assert_eq!(pending(&broker).len(), 2, "{engine}");
        let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600));
        let down = sub.expect_publish_on("later/while-down");
        assert_eq!(down.qos, QoS::AtLeastOnce);
        sub.acknowledge(&down);
        let after = sub.expect_publish_on("later/after");
        assert!(
            published.elapsed() >= Duration::from_secs(4),
            "{engine}: too early"
        );
        assert_eq!(after.qos, QoS::ExactlyOnce, "{engine}");
        sub.acknowledge(&after);
        sub.expect_silence(Duration::from_millis(500));
        let far = (before.iter())
            .find(|(_, topic)| topic == "later/far")
            .unwrap();
        assert_eq!(
            pending(&broker),
            vec![far.clone()],
            "{engine}: same id after the restart"
        );
        assert_eq!(broker.metrics().delayed_pending, 1, "{engine}");
        let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
        publisher.publish_simple("$delayed/1/later/new", b"x", QoS::AtLeastOnce);
        let new = pending(&broker)
            .into_iter()
            .find(|(_, t)| t == "later/new")
            .unwrap();
        assert!(
            new.0 > before.iter().map(|(id, _)| *id).max().unwrap(),
            "{engine}: ids go on"
        );
    }
}

/// A broker process with delayed publish on, storing in `dir` with `engine` (every commit
/// synced: `persistence.sync = "batch"`, the default).
fn start_broker(engine: &str, dir: &Path) -> BrokerProcess {
    let text = format!(
        "[runtime]\nshards = 2\n[sys]\ninterval = 0\n{ON}{}",
        store_config(engine, dir)
    );
    BrokerProcess::start(&text, &dir.with_extension("toml"))
}

#[test]
fn a_delayed_message_acknowledged_before_a_kill_fires_after_the_restart() {
    for engine in ENGINES {
        let dir = tempfile::Builder::new()
            .prefix("ringmq-delayed-kill-")
            .tempdir()
            .unwrap();
        let store = dir.path().join("data");
        let broker = start_broker(engine, &store);
        let mut sub = RawClient::connected(broker.addr, persistent_connect(V5, "kill-sub", 3600));
        sub.subscribe("kill/#", QoS::AtLeastOnce);
        sub.disconnect();
        let mut publisher = RawClient::connected_clean(broker.addr, V5, "kill-pub");
        let reason = publisher.publish_simple("$delayed/1/kill/a", b"kept", QoS::ExactlyOnce);
        assert_eq!(reason, ReasonCode::Success);
        broker.kill_9();
        let broker = start_broker(engine, &store);
        let mut sub = RawClient::connected(broker.addr, persistent_connect(V5, "kill-sub", 3600));
        let got = sub.expect_publish_on("kill/a");
        assert_eq!(got.payload(), b"kept", "{engine}");
        sub.acknowledge(&got);
    }
}
