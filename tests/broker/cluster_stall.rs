//! A measurement, not a check (ignored; run with `--ignored --nocapture`): how one publishing
//! connection fares while JetStream stalls (the publishing node's NATS server frozen with
//! SIGSTOP for [`STALL`], shorter than `cluster.ack_timeout_ms`). Prints the PUBACKs received
//! per half second and the longest wait for one.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use codec::{Packet, QoS, ReasonCode};

use crate::client::{Event, RawClient, V5, publish_packet};
use crate::cluster::start_node_with;
use crate::harness::wait_until_within;
use crate::nats_cluster::NatsCluster;

/// How long the server is frozen.
const STALL: Duration = Duration::from_secs(3);
/// How long the publisher runs: before, during and after the stall.
const RUN: Duration = Duration::from_secs(10);
/// One PUBLISH every 2 ms (500 a second) while fewer than [`WINDOW`] wait for their PUBACK
/// (a client's in-flight window, as common clients keep).
const PACE: Duration = Duration::from_millis(2);
const WINDOW: usize = 200;

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn measure_one_connection_through_a_jetstream_stall() {
    let nats = NatsCluster::start();
    let node = start_node_with(&nats, 0, "ack_timeout_ms = 10000");
    let mut publisher = RawClient::connected_clean(node.addr(), V5, "stall-pub");
    wait_until_within(Duration::from_secs(60), "JetStream keeps messages", || {
        publisher.publish_simple("stall/probe", b"p", QoS::AtLeastOnce);
        (node.cluster_figures()?.reliable_stored > 0).then_some(())
    });
    let start = Instant::now();
    let mut sent_at: BTreeMap<u16, Instant> = BTreeMap::new();
    let mut per_half_second: BTreeMap<u128, (u32, u32)> = BTreeMap::new();
    let mut longest = Duration::ZERO;
    let mut next_id: u16 = 1;
    let mut frozen: Option<Instant> = None;
    let mut resumed = false;
    while start.elapsed() < RUN || !sent_at.is_empty() {
        let now = start.elapsed();
        if frozen.is_none() && now >= Duration::from_secs(3) {
            nats.pause(0);
            frozen = Some(Instant::now());
        }
        if !resumed && frozen.is_some_and(|at| at.elapsed() >= STALL) {
            nats.resume(0);
            resumed = true;
        }
        let due = PACE * u32::from(next_id) <= now;
        if due && now < RUN && sent_at.len() < WINDOW {
            let publish = publish_packet("stall/t", b"m", QoS::AtLeastOnce, Some(next_id));
            publisher.send(&Packet::Publish(publish));
            sent_at.insert(next_id, Instant::now());
            next_id += 1;
        }
        if let Event::Packet(packet) = publisher.next_event(Duration::from_millis(1))
            && let Packet::PubAck(ack) = *packet
            && let Some(at) = sent_at.remove(&ack.packet_id.get())
        {
            longest = longest.max(at.elapsed());
            let bucket = per_half_second
                .entry(start.elapsed().as_millis() / 500)
                .or_default();
            match ack.reason_code {
                ReasonCode::Success => bucket.0 += 1,
                _ => bucket.1 += 1,
            }
        }
    }
    for (bucket, (success, refused)) in &per_half_second {
        eprintln!(
            "{:>5} ms: {success} Success, {refused} refused",
            bucket * 500
        );
    }
    let figures = node.cluster_figures().unwrap();
    eprintln!(
        "longest wait {longest:?}; retries {}, given up {}, refused {}",
        figures.reliable_retries, figures.reliable_failures, figures.acks_refused
    );
}
