//! Black-box smoke tests of a real `ringmq` process: QoS 0, 1 and 2 round trips, a retained
//! message, a Will, and a persistent session across a restart. They run with the rest of the
//! suite against the binary built with it, and in the test command's cross step against the
//! static aarch64 binary under qemu-user (`RINGMQ_TEST_BROKER_CMD`, `process.rs`), where the
//! broker runs on its epoll backend (qemu has no io_uring): the binary an ARM gateway runs.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::net::SocketAddr;
use std::path::Path;

use codec::{QoS, ReasonCode};

use crate::client::{RawClient, V5, persistent_connect, publish_packet};
use crate::process::BrokerProcess;
use crate::will::with_will;

/// The broker with its embedded defaults and a data directory in `dir`, on `addr` (a free
/// port when `None`).
fn start(dir: &Path, addr: Option<SocketAddr>) -> BrokerProcess {
    let config = format!("[persistence]\ndir = {:?}\n", dir.join("data"));
    let path = dir.join("smoke.toml");
    let mut broker = match addr {
        Some(addr) => BrokerProcess::start_on(addr, &config, &path),
        None => BrokerProcess::start(&config, &path),
    };
    broker.wait_serving();
    broker
}

#[test]
fn smoke_round_trips_at_every_qos_a_retained_message_and_a_will() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), None);
    let mut watcher = RawClient::connected_clean(broker.addr, V5, "smoke-watcher");
    watcher.subscribe("smoke/#", QoS::ExactlyOnce);
    let mut publisher = RawClient::connected_clean(broker.addr, V5, "smoke-publisher");
    for qos in [QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce] {
        let topic = format!("smoke/qos{}", qos as u8);
        let reason = publisher.publish_simple(&topic, b"round trip", qos);
        assert_eq!(reason, ReasonCode::Success);
        let publish = watcher.expect_publish_acked();
        assert_eq!((publish.topic(), publish.qos), (topic.as_str(), qos));
    }

    let mut kept = publish_packet("smoke/kept", b"last value", QoS::AtLeastOnce, Some(9));
    kept.retain = true;
    assert_eq!(publisher.publish(kept), ReasonCode::Success);
    assert_eq!(watcher.expect_publish_acked().topic(), "smoke/kept");
    let mut late = RawClient::connected_clean(broker.addr, V5, "smoke-late");
    late.subscribe("smoke/kept", QoS::AtLeastOnce);
    let retained = late.expect_publish_acked();
    assert!(retained.retain, "delivered as retained");
    assert_eq!(retained.payload(), b"last value");

    let device = RawClient::connected(broker.addr, with_will(V5, "smoke-device", "smoke/will"));
    device.drop_abruptly();
    let will = watcher.expect_publish_acked();
    assert_eq!((will.topic(), will.payload()), ("smoke/will", &b"gone"[..]));
}

#[test]
fn smoke_a_persistent_session_and_its_queue_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), None);
    let addr = broker.addr;
    let mut device = RawClient::connected(addr, persistent_connect(V5, "smoke-device", 3600));
    device.subscribe("smoke/queued", QoS::AtLeastOnce);
    device.disconnect();
    let mut publisher = RawClient::connected_clean(addr, V5, "smoke-publisher");
    for n in 0..5u8 {
        let reason = publisher.publish_simple("smoke/queued", &[n], QoS::AtLeastOnce);
        assert_eq!(reason, ReasonCode::Success);
    }
    publisher.disconnect();
    broker.stop();

    let _broker = start(dir.path(), Some(addr));
    let (mut device, ack) = RawClient::connect(addr, persistent_connect(V5, "smoke-device", 3600));
    assert!(ack.session_present, "the session came back from disk");
    for n in 0..5u8 {
        assert_eq!(device.expect_publish_acked().payload(), &[n]);
    }
}
