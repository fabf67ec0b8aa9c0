//! `[persistence]`: what a restart keeps, on each durable engine. Each test stops its broker
//! (shutdown + join) and starts another on the same directory; `crash.rs` kills a real broker
//! process instead.

use std::path::Path;
use std::time::Duration;

use codec::{Packet, ProtocolVersion, PubRec, QoS, ReasonCode};
use tempfile::TempDir;

use crate::client::{RawClient, persistent_connect, publish_packet};
use crate::harness::TestBroker;

const V5: ProtocolVersion = ProtocolVersion::V5;
const V311: ProtocolVersion = ProtocolVersion::V3_1_1;

/// Every durable engine.
pub const ENGINES: [&str; 3] = ["sled", "redb", "log"];

/// The TOML that stores the broker's state with `engine` in `dir`. The log engine gets its
/// smallest log files (1 MiB, growing to at most 4 MiB), so that it checkpoints during the
/// tests (and is killed while checkpointing or growing a file in the crash test), not only
/// replays its log.
pub fn store_config(engine: &str, dir: &Path) -> String {
    format!(
        "[persistence]\nengine = \"{engine}\"\ndir = \"{}\"\nlog_mb = 1\nlog_max_mb = 4\n",
        dir.display()
    )
}

/// QoS 1 for even numbers, QoS 2 for odd ones.
fn alternating(i: u8) -> QoS {
    if i.is_multiple_of(2) {
        QoS::AtLeastOnce
    } else {
        QoS::ExactlyOnce
    }
}

/// QoS 2 for every third number, QoS 1 for the rest.
fn every_third(i: u8) -> QoS {
    if i.is_multiple_of(3) {
        QoS::ExactlyOnce
    } else {
        QoS::AtLeastOnce
    }
}

/// Receives (and acknowledges) the messages numbered `range`, published with `qos_of`: each
/// exactly once and, per QoS, in publish order (MQTT orders a topic's messages per QoS; a
/// stored QoS 2 copy waits for the disk before its first send, so a QoS 1 one may pass it).
fn expect_in_order_per_qos(
    sub: &mut RawClient,
    range: std::ops::Range<u8>,
    qos_of: fn(u8) -> QoS,
    engine: &str,
) {
    let mut got: Vec<u8> = Vec::new();
    for _ in range.clone() {
        let publish = sub.expect_publish_acked();
        got.push(publish.payload()[0]);
    }
    for qos in [QoS::AtLeastOnce, QoS::ExactlyOnce] {
        let sent: Vec<u8> = range.clone().filter(|i| qos_of(*i) == qos).collect();
        let received: Vec<u8> = got.iter().copied().filter(|i| qos_of(*i) == qos).collect();
        assert_eq!(
            received, sent,
            "{engine}: {qos:?} messages in order, once each"
        );
    }
}

fn temp_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("ringmq-persist-")
        .tempdir()
        .expect("temp dir")
}

/// Queued QoS 1/2 messages of an offline session, its subscription and a retained message are
/// all there after a restart.
#[test]
fn offline_queue_subscriptions_and_retained_messages_survive_a_restart() {
    for engine in ENGINES {
        let dir = temp_dir();
        let config = store_config(engine, dir.path());
        {
            let broker = TestBroker::with_store(&config);
            let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600));
            sub.subscribe("t/#", QoS::ExactlyOnce);
            sub.disconnect();
            let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
            for i in 0..10u8 {
                let qos = alternating(i);
                let reason = publisher.publish_simple("t/a", &[i], qos);
                assert_eq!(reason, ReasonCode::Success, "{engine}: message {i}");
            }
            let id = publisher.next_packet_id();
            let mut retained = publish_packet("r/x", b"kept", QoS::AtLeastOnce, Some(id));
            retained.retain = true;
            publisher.publish(retained);
            publisher.disconnect();
        }
        let broker = TestBroker::with_store(&config);
        let (mut sub, connack) =
            RawClient::connect(broker.addr(), persistent_connect(V5, "sub", 3600));
        assert!(connack.session_present, "{engine}: the session came back");
        expect_in_order_per_qos(&mut sub, 0..10, alternating, engine);
        let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub2");
        publisher.publish_simple("t/b", b"after", QoS::AtLeastOnce);
        let publish = sub.expect_publish_acked();
        assert_eq!(
            publish.payload(),
            b"after",
            "{engine}: subscription restored"
        );
        let mut fresh = RawClient::connected_clean(broker.addr(), V5, "fresh");
        fresh.subscribe("r/#", QoS::AtLeastOnce);
        let publish = fresh.expect_publish_on("r/x");
        assert!(publish.retain, "{engine}: retained flag");
        assert_eq!(publish.payload(), b"kept");
    }
}

/// A QoS 1 message sent but not acknowledged comes again, DUP set and under the same packet id;
/// a QoS 2 flow whose PUBREC arrived gets its PUBREL again.
#[test]
fn messages_in_flight_are_resent_after_a_restart() {
    for engine in ENGINES {
        let dir = temp_dir();
        let config = store_config(engine, dir.path());
        let (first_id, second_id);
        {
            let broker = TestBroker::with_store(&config);
            let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600));
            sub.subscribe("t/#", QoS::ExactlyOnce);
            let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
            publisher.publish_simple("t/1", b"one", QoS::AtLeastOnce);
            publisher.publish_simple("t/2", b"two", QoS::ExactlyOnce);
            let one = sub.expect_publish();
            let two = sub.expect_publish();
            first_id = one.packet_id.expect("QoS 1 id");
            second_id = two.packet_id.expect("QoS 2 id");
            sub.send(&Packet::PubRec(PubRec::new(second_id)));
            sub.recv_where("PUBREL", |p| {
                matches!(p, Packet::PubRel(r) if r.packet_id == second_id).then_some(())
            });
            sub.ping();
            sub.drop_abruptly();
        }
        let broker = TestBroker::with_store(&config);
        let (mut sub, connack) =
            RawClient::connect(broker.addr(), persistent_connect(V5, "sub", 3600));
        assert!(connack.session_present, "{engine}");
        let again = sub.expect_publish();
        assert_eq!(again.packet_id, Some(first_id), "{engine}: same packet id");
        assert!(again.dup, "{engine}: DUP on the re-send");
        assert_eq!(again.payload(), b"one");
        sub.recv_where("PUBREL again", |p| {
            matches!(p, Packet::PubRel(r) if r.packet_id == second_id).then_some(())
        });
    }
}

/// Session expiry and message expiry count the time the broker was down.
#[test]
fn expiry_counts_the_downtime() {
    for engine in ENGINES {
        let dir = temp_dir();
        let config = store_config(engine, dir.path());
        {
            let broker = TestBroker::with_store(&config);
            let sub = RawClient::connected(broker.addr(), persistent_connect(V5, "short", 1));
            sub.disconnect();
            let long = RawClient::connected(broker.addr(), persistent_connect(V5, "long", 3600));
            long.disconnect();
            let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
            let id = publisher.next_packet_id();
            let mut retained = publish_packet("r/brief", b"x", QoS::AtLeastOnce, Some(id));
            retained.retain = true;
            retained.properties.make_mut().message_expiry_interval = Some(1);
            publisher.publish(retained);
        }
        std::thread::sleep(Duration::from_millis(1500));
        let broker = TestBroker::with_store(&config);
        let (_short, connack) =
            RawClient::connect(broker.addr(), persistent_connect(V5, "short", 1));
        assert!(
            !connack.session_present,
            "{engine}: expired while the broker was down"
        );
        let (_long, connack) =
            RawClient::connect(broker.addr(), persistent_connect(V5, "long", 3600));
        assert!(connack.session_present, "{engine}: not expired");
        let mut fresh = RawClient::connected_clean(broker.addr(), V5, "fresh");
        fresh.subscribe("r/#", QoS::AtLeastOnce);
        fresh.expect_silence(Duration::from_millis(300));
    }
}

/// A store that cannot be opened stops the start with an error naming the directory.
#[test]
fn an_unusable_store_directory_is_named_in_the_start_error() {
    for engine in ENGINES {
        let dir = temp_dir();
        let file = dir.path().join("not-a-directory");
        std::fs::write(&file, b"x").expect("write a file");
        let mut raw = ringmq::config::default_raw().expect("defaults");
        let base = ringmq::config::parse_raw("base", crate::harness::BASE).expect("parses");
        raw.overlay(base);
        let store = store_config(engine, &file);
        raw.overlay(ringmq::config::parse_raw("store", &store).expect("parses"));
        let config = raw.validate().expect("validates");
        let error = ringmq::Broker::start(config)
            .err()
            .expect("the start fails")
            .to_string();
        assert!(error.contains("not-a-directory"), "{engine}: {error}");
        assert!(error.contains(engine), "{engine}: {error}");
        assert_eq!(
            std::fs::read(&file).expect("still there"),
            b"x",
            "nothing deleted"
        );
    }
}

/// A stored queue longer than `persistence.memory_queue_messages` lives on disk beyond that
/// bound and comes back in order, both while the broker runs and after a restart.
#[test]
fn queues_beyond_the_memory_bound_are_read_back_from_disk_in_order() {
    for engine in ENGINES {
        let dir = temp_dir();
        let config = format!(
            "{}memory_queue_messages = 4\n",
            store_config(engine, dir.path())
        );
        let broker = TestBroker::with_store(&config);
        let publish_batch = |first: u8| {
            let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
            for i in first..first + 40 {
                let qos = every_third(i);
                assert_eq!(
                    publisher.publish_simple("t/a", &[i], qos),
                    ReasonCode::Success
                );
            }
            publisher.disconnect();
        };
        let sub = RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600));
        let mut sub = {
            let mut sub = sub;
            sub.subscribe("t/#", QoS::ExactlyOnce);
            sub.disconnect();
            publish_batch(0);
            RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600))
        };
        expect_in_order_per_qos(&mut sub, 0..40, every_third, engine);
        sub.disconnect();
        publish_batch(40);
        drop(broker);
        let broker = TestBroker::with_store(&config);
        let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600));
        expect_in_order_per_qos(&mut sub, 40..80, every_third, engine);
        sub.expect_silence(Duration::from_millis(200));
    }
}

/// With `sync = "interval"` acknowledgements do not wait for the disk, and a clean stop syncs
/// what is left: a restart finds the queue.
#[test]
fn interval_sync_keeps_the_state_across_a_clean_restart() {
    for engine in ENGINES {
        eprintln!("engine {engine}");
        let dir = temp_dir();
        let config = format!(
            "{}sync = \"interval\"\nsync_interval_ms = 50\n",
            store_config(engine, dir.path())
        );
        {
            let broker = TestBroker::with_store(&config);
            let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600));
            sub.subscribe("t/#", QoS::AtLeastOnce);
            sub.disconnect();
            let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
            for i in 0..5u8 {
                publisher.publish_simple("t/a", &[i], QoS::AtLeastOnce);
            }
            publisher.disconnect();
        }
        let broker = TestBroker::with_store(&config);
        let (mut sub, connack) =
            RawClient::connect(broker.addr(), persistent_connect(V5, "sub", 3600));
        assert!(connack.session_present, "{engine}");
        for i in 0..5u8 {
            assert_eq!(sub.expect_publish_acked().payload(), &[i], "{engine}");
        }
    }
}

/// A persistent subscriber that keeps reconnecting (its session moving between shards) while
/// messages arrive, acknowledging only some before each reconnect, then a restart: every QoS 1
/// message arrives at least once and no stored write is ever inconsistent (checked when each
/// test broker stops).
#[test]
fn a_session_moving_between_shards_keeps_its_stored_state_consistent() {
    for engine in ENGINES {
        let dir = temp_dir();
        let config = format!(
            "{}memory_queue_messages = 3\n",
            store_config(engine, dir.path())
        );
        let mut received = std::collections::BTreeSet::new();
        {
            let broker = TestBroker::with_store(&config);
            let mut sub =
                RawClient::connected(broker.addr(), persistent_connect(V5, "mover", 3600));
            sub.subscribe("m/#", QoS::AtLeastOnce);
            let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
            for round in 0..10u8 {
                for i in 0..6u8 {
                    publisher.publish_simple("m/a", &[round * 6 + i], QoS::AtLeastOnce);
                }
                // Take two, acknowledge one, then leave without DISCONNECT.
                let first = sub.expect_publish_acked();
                received.insert(first.payload()[0]);
                let second = sub.expect_publish();
                received.insert(second.payload()[0]);
                sub.drop_abruptly();
                sub = RawClient::connected(broker.addr(), persistent_connect(V5, "mover", 3600));
            }
            sub.drop_abruptly();
        }
        let broker = TestBroker::with_store(&config);
        let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "mover", 3600));
        while received.len() < 60 {
            let publish = sub.expect_publish_acked();
            received.insert(publish.payload()[0]);
        }
        assert_eq!(received.len(), 60, "{engine}");
    }
}

/// A publisher pipelining more QoS 1 messages than `limits.receive_maximum` while their
/// acknowledgements wait for the disk is parked at that bound and resumed as they leave: every
/// message is acknowledged and delivered, in order.
#[test]
fn a_connection_with_its_bound_of_acknowledgements_held_is_parked_and_resumed() {
    for engine in ENGINES {
        let dir = temp_dir();
        let config = format!(
            "{}[limits]\nreceive_maximum = 2\n",
            store_config(engine, dir.path())
        );
        let broker = TestBroker::with_store(&config);
        let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600));
        sub.subscribe("p/#", QoS::AtLeastOnce);
        let mut publisher = RawClient::connected_clean(broker.addr(), V311, "pub");
        let mut frames = bytes::BytesMut::new();
        for i in 1..=20u8 {
            let publish = publish_packet("p/a", &[i], QoS::AtLeastOnce, Some(u16::from(i)));
            codec::encode(&Packet::Publish(publish), V311, &mut frames).expect("encodes");
        }
        publisher.send_raw(&frames);
        for i in 1..=20u16 {
            publisher.recv_where("PUBACK", |p| {
                matches!(p, Packet::PubAck(a) if a.packet_id.get() == i).then_some(())
            });
        }
        for i in 1..=20u8 {
            assert_eq!(sub.expect_publish_acked().payload(), &[i], "{engine}");
        }
    }
}

/// QoS 2 flows in progress that take more than half a `log` file (40 messages of 40 KiB, none
/// acknowledged by the subscriber, against files of 1 MiB) grow the next file rather than go
/// through the B-tree, and a restart replays the grown file: every one is re-sent once.
#[test]
fn qos2_flows_beyond_half_a_log_file_grow_it_and_survive_a_restart() {
    let dir = temp_dir();
    let config = format!(
        "[persistence]\nengine = \"log\"\ndir = \"{}\"\nlog_mb = 1\nlog_max_mb = 8\n",
        dir.path().display()
    );
    let message = |i: u8| {
        let mut payload = vec![7; 40 << 10];
        payload[0] = i;
        payload
    };
    {
        let broker = TestBroker::with_store(&config);
        let mut sub = RawClient::connected(broker.addr(), persistent_connect(V5, "sub", 3600));
        sub.subscribe("t/#", QoS::ExactlyOnce);
        let mut publisher = RawClient::connected_clean(broker.addr(), V5, "pub");
        for i in 0..40u8 {
            let reason = publisher.publish_simple("t/a", &message(i), QoS::ExactlyOnce);
            assert_eq!(reason, ReasonCode::Success, "message {i}");
        }
        for i in 0..40u8 {
            assert_eq!(sub.expect_publish().payload()[0], i, "first send");
        }
        sub.drop_abruptly();
    }
    let largest = ["log-0", "log-1"]
        .iter()
        .map(|file| {
            std::fs::metadata(dir.path().join(file))
                .expect("a log file")
                .len()
        })
        .max();
    assert!(
        largest.is_some_and(|len| len >= 2 << 20),
        "no log file grew: {largest:?} bytes"
    );
    let broker = TestBroker::with_store(&config);
    let (mut sub, connack) = RawClient::connect(broker.addr(), persistent_connect(V5, "sub", 3600));
    assert!(connack.session_present, "the session came back");
    for i in 0..40u8 {
        let again = sub.expect_publish();
        assert!(again.dup, "DUP on the re-send of {i}");
        assert_eq!(
            again.payload(),
            message(i).as_slice(),
            "message {i} re-sent whole"
        );
    }
}
