//! The fault suite's checker: what every publisher had acknowledged against what every
//! persistent subscriber received (loss, QoS 2 twice), and whether the nodes agree on the
//! retained messages once the faults are healed (divergence).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use codec::{Packet, QoS};

use super::clients::{Published, Received, published_qos};
use crate::client::{Event, RawClient, V5};

/// What one run found.
/// (subscriber, message, a moment, an earlier moment if any).
pub type Noted = (usize, u64, Instant, Option<Instant>);

#[derive(Debug, Default)]
pub struct Verdict {
    /// Messages acknowledged with Success (retained ones apart).
    pub acked: usize,
    pub refused: u64,
    pub unknown: u64,
    /// (subscriber, message, when it was acknowledged, -) never delivered to that subscriber.
    pub lost: Vec<Noted>,
    /// QoS 2 messages delivered more than once to one subscriber.
    pub qos2_twice: usize,
    /// (subscriber, message, when it arrived the second time, when it arrived first), of the
    /// QoS 2 ones.
    pub qos2_twice_at: Vec<Noted>,
    /// QoS 1 messages delivered more than once (allowed: at least once).
    pub qos1_again: usize,
    /// Reconnections that found no session.
    pub sessions_lost: u32,
    /// Retained topics the nodes still disagree on.
    pub divergent: Vec<String>,
    /// Retained topics a node serves older than their last acknowledged message.
    pub retained_behind: Vec<String>,
}

impl Verdict {
    pub fn clean(&self) -> bool {
        self.lost.is_empty()
            && self.qos2_twice == 0
            && self.sessions_lost == 0
            && self.divergent.is_empty()
            && self.retained_behind.is_empty()
    }
}

/// Every message acknowledged by a publisher.
pub fn acknowledged(published: &[Published]) -> BTreeSet<u64> {
    published
        .iter()
        .flat_map(|p| p.acked.iter().copied())
        .collect()
}

/// Whether every subscriber has every acknowledged message.
pub fn all_delivered(acked: &BTreeSet<u64>, received: &[Received]) -> bool {
    received
        .iter()
        .all(|r| acked.iter().all(|id| r.counts.contains_key(id)))
}

/// Loss and duplicates.
pub fn deliveries(published: &[Published], received: &[Received]) -> Verdict {
    let acked = acknowledged(published);
    let mut verdict = Verdict {
        acked: acked.len(),
        refused: published.iter().map(|p| p.refused).sum(),
        unknown: published.iter().map(|p| p.unknown).sum(),
        sessions_lost: received.iter().map(|r| r.sessions_lost).sum(),
        ..Verdict::default()
    };
    let acked_at: BTreeMap<u64, Instant> = published
        .iter()
        .flat_map(|p| p.acked_at.iter().map(|(&id, &at)| (id, at)))
        .collect();
    for (index, subscriber) in received.iter().enumerate() {
        for (&id, &at) in &acked_at {
            if !subscriber.counts.contains_key(&id) {
                verdict.lost.push((index, id, at, None));
            }
        }
        for (&id, &count) in &subscriber.counts {
            if count > 1 {
                match published_qos(id) {
                    2 => {
                        verdict.qos2_twice += 1;
                        if let Some(&again) = subscriber.again_at.get(&id) {
                            let first = subscriber.first_at.get(&id).copied();
                            verdict.qos2_twice_at.push((index, id, again, first));
                        }
                    }
                    _ => verdict.qos1_again += 1,
                }
            }
        }
    }
    verdict
}

/// The retained messages `addr` serves under `r/#`: topic to message; `None` if it does not
/// answer.
pub fn retained_on(addr: SocketAddr) -> Option<BTreeMap<String, u64>> {
    let stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    let mut client = RawClient::over(stream, V5);
    let connect = crate::client::connect_packet(V5, "", true);
    client.send(&Packet::from(connect));
    let Event::Packet(connack) = client.next_event(Duration::from_secs(5)) else {
        return None;
    };
    if !matches!(*connack, Packet::ConnAck(_)) {
        return None;
    }
    let id = client.next_packet_id();
    let filter =
        crate::client::subscribe_packet(id, "r/#", crate::client::qos_options(QoS::AtMostOnce));
    client.send(&Packet::Subscribe(filter));
    let mut retained = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match client.next_event(Duration::from_secs(1)) {
            Event::Packet(packet) => {
                if let Packet::Publish(publish) = *packet
                    && let Some(value) = publish.payload().first_chunk::<8>()
                {
                    retained.insert(publish.topic().to_owned(), u64::from_be_bytes(*value));
                }
            }
            Event::Timeout => break,
            Event::Closed => return None,
        }
    }
    Some(retained)
}

/// The topics `views` disagree on, and those a view serves older than `last_acked`.
pub fn retained(
    views: &[BTreeMap<String, u64>],
    last_acked: &BTreeMap<String, u64>,
) -> (Vec<String>, Vec<String>) {
    let topics: BTreeSet<&String> = views
        .iter()
        .flat_map(|v| v.keys())
        .chain(last_acked.keys())
        .collect();
    let mut divergent = Vec::new();
    let mut behind = Vec::new();
    for topic in topics {
        let values: BTreeSet<Option<u64>> = views.iter().map(|v| v.get(topic).copied()).collect();
        if values.len() > 1 {
            divergent.push(topic.clone());
        }
        if let Some(&acked) = last_acked.get(topic)
            && values.iter().any(|value| value.is_none_or(|v| v < acked))
        {
            behind.push(topic.clone());
        }
    }
    (divergent, behind)
}
