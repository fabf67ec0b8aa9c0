//! Subscription order across connections: a SUBSCRIBE the broker has received before another
//! client's PUBLISH takes effect for that PUBLISH, whichever shards the two connections are on.
//! Third-party conformance suites send B's SUBSCRIBE and then A's PUBLISH without waiting for
//! B's SUBACK, and expect B to get the message (as a one-threaded broker always delivers it).
//!
//! Each round: B (on one shard) sends a SUBSCRIBE to a fresh topic and A (on the other shard)
//! publishes a probe to it: with `runtime.subscribe_order = "received"` at once, microseconds
//! apart, so either shard may read its socket first (input fences order them; with
//! `"handled"` about half the probes went out before B's shard had read the SUBSCRIBE); with
//! `"handled"` (the default) as soon as B's shard has taken the SUBSCRIBE (its replica counts
//! the subscription; the publisher's shard may not have the change yet). Once B has its
//! SUBACK, A publishes a fence to the same topic: B must get the probe before the fence (one
//! publisher's messages to one subscriber keep their order), so a miss is seen without waiting
//! for a timeout. B then unsubscribes (a client's subscriptions are bounded). The same race
//! within one shard (both packets read in one turn) is `sim_tests.rs`'s, deterministic.

use std::time::{Duration, Instant};

use codec::{Packet, ProtocolVersion, QoS, ReasonCode};

use crate::client::{Event, RawClient, V5, V311, publish_packet, qos_options, subscribe_packet};
use crate::harness::TestBroker;

/// Rounds per direction and protocol.
const ROUNDS: usize = 2_000;

/// What B saw in one round.
#[derive(Debug, PartialEq)]
enum Round {
    ProbeDelivered,
    ProbeMissed,
}

/// What the subscriber has read in one round.
#[derive(Default)]
struct Seen {
    suback: Option<ReasonCode>,
    probe: bool,
    fence: bool,
}

impl Seen {
    /// Reads the subscriber's next packet: the SUBACK, the probe or the fence; the probe only
    /// once and before the fence, and nothing else.
    fn read(&mut self, subscriber: &mut RawClient, probe: &str, fence: &str, round: usize) {
        let packet = match subscriber.next_event(Duration::from_secs(10)) {
            Event::Packet(packet) => *packet,
            other => panic!("round {round}: expected a packet, got {other:?}"),
        };
        match packet {
            Packet::SubAck(ack) => self.suback = ack.reason_codes.first().copied(),
            Packet::Publish(p) if p.payload() == probe.as_bytes() && !self.fence => {
                assert!(!self.probe, "round {round}: the probe came twice");
                self.probe = true;
            }
            Packet::Publish(p) if p.payload() == fence.as_bytes() => self.fence = true,
            other => panic!("round {round}: unexpected {other:?}"),
        }
    }
}

/// When A publishes its probe.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// Right after B's SUBSCRIBE left (`subscribe_order = "received"`).
    Received,
    /// Once B's shard has taken the SUBSCRIBE (`subscribe_order = "handled"`).
    Handled,
}

/// Waits until B's shard has taken the SUBSCRIBE: its own replica holds one subscription more.
fn until_taken(broker: &TestBroker, shard: usize, held_before: u64, round: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while broker.replica_subscriptions()[shard] == held_before {
        assert!(
            Instant::now() < deadline,
            "round {round}: B's shard never took the SUBSCRIBE"
        );
        std::thread::yield_now();
    }
}

fn subscribe_then_publish(
    (broker, order, subscriber_shard): (&TestBroker, Order, usize),
    publisher: &mut RawClient,
    subscriber: &mut RawClient,
    round: usize,
) -> Round {
    let held_before = broker.replica_subscriptions()[subscriber_shard];
    let topic = format!("order/{round}");
    let (probe_payload, fence_payload) = (format!("probe {round}"), format!("fence {round}"));
    let id = subscriber.next_packet_id();
    subscriber.send(&Packet::Subscribe(subscribe_packet(
        id,
        &topic,
        qos_options(QoS::AtMostOnce),
    )));
    if order == Order::Handled {
        until_taken(broker, subscriber_shard, held_before, round);
    }
    publisher.send(&Packet::Publish(publish_packet(
        &topic,
        probe_payload.as_bytes(),
        QoS::AtMostOnce,
        None,
    )));
    let mut seen = Seen::default();
    while seen.suback.is_none() {
        seen.read(subscriber, &probe_payload, &fence_payload, round);
    }
    assert_eq!(
        seen.suback,
        Some(ReasonCode::Success),
        "round {round}: SUBACK"
    );
    publisher.send(&Packet::Publish(publish_packet(
        &topic,
        fence_payload.as_bytes(),
        QoS::AtMostOnce,
        None,
    )));
    while !seen.fence {
        seen.read(subscriber, &probe_payload, &fence_payload, round);
    }
    let unsubscribed = subscriber.unsubscribe(&topic);
    assert!(
        unsubscribed
            .reason_codes
            .iter()
            .all(|code| *code == ReasonCode::Success),
        "round {round}: UNSUBACK {unsubscribed:?}"
    );
    if seen.probe {
        Round::ProbeDelivered
    } else {
        Round::ProbeMissed
    }
}

/// A on `publisher_shard`, B on the other one; every round's probe must reach B.
fn every_probe_delivered(protocol: ProtocolVersion, publisher_shard: usize, order: Order) {
    let broker = match order {
        Order::Received => TestBroker::with_config("[runtime]\nsubscribe_order = \"received\"\n"),
        Order::Handled => TestBroker::start(),
    };
    let subscriber_shard = 1 - publisher_shard;
    let mut publisher = broker
        .connect_to_shard(publisher_shard, protocol, "order-publisher")
        .expect("a connection on the publisher's shard");
    let mut subscriber = broker
        .connect_to_shard(subscriber_shard, protocol, "order-subscriber")
        .expect("a connection on the subscriber's shard");
    let missed: Vec<usize> = (0..ROUNDS)
        .filter(|&round| {
            subscribe_then_publish(
                (&broker, order, subscriber_shard),
                &mut publisher,
                &mut subscriber,
                round,
            ) == Round::ProbeMissed
        })
        .collect();
    assert!(
        missed.is_empty(),
        "{} of {ROUNDS} probes published right after another shard's SUBSCRIBE were not \
         delivered (rounds {:?}...)",
        missed.len(),
        &missed[..missed.len().min(10)]
    );
    let (held, owed) = broker.order_counts();
    eprintln!(
        "{ROUNDS} rounds: {held} PUBLISH packets held, {owed} copies owed to a SUBSCRIBE applied after"
    );
    if order == Order::Received {
        // Routed at once: a SUBSCRIBE that may precede the probe but had not reached the
        // publisher's replica sends the probe's copy when it does.
        assert_eq!(held, 0, "a non-retained PUBLISH was held for order");
    }
}

#[test]
fn a_subscribe_sent_before_a_publish_on_another_shard_takes_effect_v5() {
    every_probe_delivered(V5, 0, Order::Received);
}

#[test]
fn a_subscribe_sent_before_a_publish_on_another_shard_takes_effect_the_other_way_v5() {
    every_probe_delivered(V5, 1, Order::Received);
}

#[test]
fn a_subscribe_sent_before_a_publish_on_another_shard_takes_effect_v311() {
    every_probe_delivered(V311, 0, Order::Received);
}

#[test]
fn a_subscribe_on_shard_1_takes_effect_for_a_publish_on_shard_0_v5() {
    every_probe_delivered(V5, 0, Order::Handled);
}

#[test]
fn a_subscribe_on_shard_0_takes_effect_for_a_publish_on_shard_1_v5() {
    every_probe_delivered(V5, 1, Order::Handled);
}

#[test]
fn a_subscribe_on_shard_1_takes_effect_for_a_publish_on_shard_0_v311() {
    every_probe_delivered(V311, 0, Order::Handled);
}
