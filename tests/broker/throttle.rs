//! Per-connection publish rates (`limits.max_publish_rate`, `limits.max_publish_bytes_rate`):
//! a publisher over its rate is slowed to about the rate (its socket is not read meanwhile),
//! loses nothing, and slows no other client, not even one on its own shard; a reload changes
//! the rate for later packets. Bounds are generous: only a broker that does not throttle, or
//! throttles far too much, fails them.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::{Duration, Instant};

use bytes::BytesMut;
use codec::{Packet, QoS};

use crate::client::{Event, RawClient, V5, publish_packet};
use crate::harness::{TestBroker, wait_until};

/// A subscriber to `rate/#` and the broker's other clients' topic prefix.
fn subscriber(broker: &TestBroker) -> RawClient {
    let mut sub = RawClient::connected_clean(broker.addr(), V5, "watcher");
    sub.subscribe("rate/#", QoS::AtMostOnce);
    sub
}

/// Sends `count` QoS 0 PUBLISH packets on `topic` in one write, payload `i` padded to `size`.
fn flood(client: &mut RawClient, topic: &str, count: usize, size: usize) {
    let mut frames = BytesMut::new();
    for i in 0..count {
        let mut payload = format!("{i:06}").into_bytes();
        payload.resize(size.max(6), b'.');
        let packet = Packet::Publish(publish_packet(topic, &payload, QoS::AtMostOnce, None));
        codec::encode(&packet, V5, &mut frames).unwrap();
    }
    client.send_raw(&frames);
}

/// What a subscriber has received so far, per topic, in order.
#[derive(Default)]
struct Seen {
    slow: Vec<usize>,
    other: usize,
}

impl Seen {
    /// Reads what arrives until `until`.
    fn read_until(&mut self, sub: &mut RawClient, until: Instant) {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match sub.next_event(left) {
                Event::Packet(packet) => match *packet {
                    Packet::Publish(publish) if publish.topic() == "rate/slow" => {
                        let index = std::str::from_utf8(&publish.payload()[..6]).unwrap();
                        self.slow.push(index.parse().unwrap());
                    }
                    Packet::Publish(_) => self.other += 1,
                    other => panic!("unexpected {other:?}"),
                },
                Event::Timeout => return,
                Event::Closed => panic!("the subscriber was disconnected"),
            }
        }
    }

    /// Reads until `count` messages of the slow publisher are in; returns when the last came.
    fn read_all_slow(&mut self, sub: &mut RawClient, count: usize) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.slow.len() < count {
            assert!(
                Instant::now() < deadline,
                "only {} of {count} messages arrived",
                self.slow.len()
            );
            self.read_until(sub, Instant::now() + Duration::from_millis(50));
        }
        assert_eq!(self.slow, (0..count).collect::<Vec<_>>(), "all, in order");
        Instant::now()
    }
}

#[test]
fn a_publisher_over_its_message_rate_is_slowed_and_loses_nothing_while_others_flow() {
    // 10 messages a second, a burst of 10: 40 messages take about 3 s.
    let broker = TestBroker::with_config("[limits]\nmax_publish_rate = 10\n");
    let mut sub = subscriber(&broker);
    let (mut slow, shard) = broker.connect_on_shard(V5, "slow");
    let mut other = broker
        .connect_to_shard(shard, V5, "other")
        .expect("a client on its shard");
    let started = Instant::now();
    flood(&mut slow, "rate/slow", 40, 16);
    // Its neighbour on the same shard publishes meanwhile, within its own burst.
    for _ in 0..5 {
        let reason = other.publish_simple("rate/other", b"quick", QoS::AtLeastOnce);
        assert!(!reason.is_error());
    }
    let mut seen = Seen::default();
    seen.read_until(&mut sub, started + Duration::from_secs(1));
    assert_eq!(seen.other, 5, "the other client was not slowed");
    assert!(
        seen.slow.len() <= 30,
        "{} of 40 messages within a second at 10/s: not throttled",
        seen.slow.len()
    );
    let last = seen.read_all_slow(&mut sub, 40);
    assert!(
        last - started >= Duration::from_secs(2),
        "40 messages at 10/s (burst 10) took only {:?}",
        last - started
    );
    assert!(broker.metrics().publishers_throttled >= 1);
    slow.ping();
}

#[test]
fn a_publisher_over_its_bytes_rate_is_slowed() {
    // 4,000 bytes a second: twelve 1 KB messages take about 2 s after the 4 KB burst.
    let broker = TestBroker::with_config("[limits]\nmax_publish_bytes_rate = 4000\n");
    let mut sub = subscriber(&broker);
    let mut slow = RawClient::connected_clean(broker.addr(), V5, "bulky");
    let started = Instant::now();
    flood(&mut slow, "rate/slow", 12, 1000);
    let mut seen = Seen::default();
    seen.read_until(&mut sub, started + Duration::from_millis(500));
    assert!(
        seen.slow.len() <= 9,
        "{} of 12 KB messages within 0.5 s at 4 KB/s: not throttled",
        seen.slow.len()
    );
    let last = seen.read_all_slow(&mut sub, 12);
    assert!(last - started >= Duration::from_secs(1));
    assert!(broker.metrics().publishers_throttled >= 1);
}

#[test]
fn a_reload_changes_the_rate_for_later_packets() {
    let broker = TestBroker::with_config("");
    let mut sub = subscriber(&broker);
    let mut publisher = RawClient::connected_clean(broker.addr(), V5, "reloaded");
    flood(&mut publisher, "rate/slow", 20, 16);
    let mut seen = Seen::default();
    seen.read_all_slow(&mut sub, 20);
    assert_eq!(broker.metrics().publishers_throttled, 0, "no limit yet");

    broker.apply_reloadable("[limits]\nmax_publish_rate = 2\n");
    publisher.ping();
    let started = Instant::now();
    flood(&mut publisher, "rate/more", 20, 16);
    let mut more = 0;
    let window = started + Duration::from_secs(1);
    while let Event::Packet(packet) =
        sub.next_event(window.saturating_duration_since(Instant::now()))
    {
        more += usize::from(matches!(*packet, Packet::Publish(_)));
    }
    assert!(more <= 10, "{more} of 20 within a second at 2/s");
    assert!(broker.metrics().publishers_throttled >= 1);

    // Lifting the limit releases the rest at once (at 2/s it would take about 8 s more).
    broker.apply_reloadable("[limits]\nmax_publish_rate = 0\n");
    let lifted = Instant::now();
    wait_until("the rest after the limit is lifted", || {
        if let Event::Packet(packet) = sub.next_event(Duration::from_millis(20)) {
            more += usize::from(matches!(*packet, Packet::Publish(_)));
        }
        (more == 20).then_some(())
    });
    assert!(
        lifted.elapsed() < Duration::from_secs(5),
        "the lifted limit still held the publisher back ({:?})",
        lifted.elapsed()
    );
}
