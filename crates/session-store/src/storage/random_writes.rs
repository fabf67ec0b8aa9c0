//! Random batches of session writes for the tests that compare an engine with the model
//! (`model_tests.rs`, `power_cut_tests.rs`): seeded, so a failure reproduces from its seed.
//! Writes are drawn from small domains (three clients, eight packet ids, nearby sequence
//! numbers) so that both applied and skipped writes are common.

use std::time::{Duration, SystemTime};

use codec::QoS;

use super::contract_writes::{message, pid, subscribed, text};
use super::*;
use crate::SessionExpiry;

/// A small xorshift generator: enough to vary writes, and the same for a seed everywhere.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(len as u64)).unwrap()
    }
    fn name(&mut self, names: &[&'static str]) -> &'static str {
        names[self.index(names.len())]
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }
}

pub(super) const CLIENTS: [&str; 3] = ["a", "b", "c"];

/// Draws writes, keeping each client's next sequence number so that most queue writes apply.
pub(super) struct Writes {
    rng: Rng,
    next_seq: [u64; 3],
}

impl Writes {
    /// Writes drawn from `seed`.
    pub(super) fn new(seed: u64) -> Self {
        Self {
            rng: Rng(seed),
            next_seq: [0; 3],
        }
    }

    /// A batch of up to eight writes; most of those that name a queued message or an inflight
    /// id name one `stored` (as the batch starts) has.
    pub(super) fn batch(&mut self, stored: &Recovered) -> Vec<SessionWrite> {
        let len = self.rng.below(9);
        (0..len).map(|_| self.write(stored)).collect()
    }

    /// The owner a `SessionSaved` records: any of them, so a save by another identity
    /// replaces the stored one.
    fn owner(&mut self) -> StoredOwner {
        match self.rng.below(4) {
            0 => StoredOwner::Unbound,
            1 => StoredOwner::Anonymous,
            _ => StoredOwner::User(text(self.rng.name(&["alice", "bob"]))),
        }
    }

    fn write(&mut self, stored: &Recovered) -> SessionWrite {
        let c = usize::try_from(self.rng.below(3)).unwrap();
        let client_id = text(CLIENTS[c]);
        let session = stored.sessions.iter().find(|s| s.client_id == client_id);
        let mut packet_id = pid(u16::try_from(1 + self.rng.below(8)).unwrap());
        let mut near = self.next_seq[c].saturating_sub(self.rng.below(6));
        if let Some(session) = session.filter(|_| self.rng.below(4) > 0) {
            if !session.queued.is_empty() {
                near = self.rng.pick(&session.queued).0;
            }
            if !session.inflight.is_empty() {
                packet_id = self.rng.pick(&session.inflight).0;
            }
        }
        let kind = match self.rng.below(26) {
            // Mostly save a session that is not stored, rarely remove one.
            1 if self.rng.below(3) > 0 => 0,
            20..=23 if session.is_none() => 0,
            20..=23 => 5,
            kind => kind,
        };
        match kind {
            0 => SessionWrite::SessionSaved {
                client_id,
                protocol: codec::ProtocolVersion::V5,
                expiry: SessionExpiry::After(u32::try_from(self.rng.below(100)).unwrap()),
                will: None,
                owner: Box::new(self.owner()),
            },
            1 => SessionWrite::SessionRemoved { client_id },
            2 => SessionWrite::SessionDisconnected {
                client_id,
                at: SystemTime::UNIX_EPOCH + Duration::from_secs(self.rng.below(1_000)),
            },
            3 => subscribed(
                CLIENTS[c],
                self.rng.name(&["x", "y/+", "#"]),
                QoS::AtLeastOnce,
            ),
            4 => SessionWrite::Unsubscribed {
                client_id,
                filter: text(self.rng.name(&["x", "y/+", "#"])),
            },
            5..=8 => {
                let seq = if self.rng.below(5) == 0 {
                    near
                } else {
                    self.next_seq[c] += 1 + self.rng.below(2);
                    self.next_seq[c]
                };
                let qos = *self
                    .rng
                    .pick(&[QoS::AtMostOnce, QoS::AtLeastOnce, QoS::ExactlyOnce]);
                let mut message = message(&format!("t/{seq}"), qos);
                message.payload =
                    bytes::Bytes::from(vec![0x5a; usize::try_from(self.rng.below(64)).unwrap()]);
                SessionWrite::MessageQueued {
                    client_id,
                    seq,
                    message: Box::new(message),
                }
            }
            9 => SessionWrite::MessageDropped {
                client_id,
                seq: near,
            },
            10 if self.rng.below(2) == 0 => {
                self.next_seq[c] += 1;
                let qos = *self.rng.pick(&[QoS::AtLeastOnce, QoS::ExactlyOnce]);
                SessionWrite::MessageSent {
                    client_id,
                    seq: self.next_seq[c],
                    packet_id: pid(u16::try_from(1 + self.rng.below(8)).unwrap()),
                    message: Box::new(message(&format!("t/{}", self.next_seq[c]), qos)),
                }
            }
            10..=12 => SessionWrite::InflightSent {
                client_id,
                seq: near,
                packet_id: pid(u16::try_from(1 + self.rng.below(8)).unwrap()),
            },
            13 => SessionWrite::InflightReleased {
                client_id,
                packet_id,
            },
            14 | 15 => SessionWrite::InflightAcked {
                client_id,
                packet_id,
            },
            16 => SessionWrite::Qos2Received {
                client_id,
                packet_id,
            },
            17 => SessionWrite::Qos2Released {
                client_id,
                packet_id,
            },
            18 => {
                let topic = self.rng.name(&["r/1", "r/2", "r/3"]);
                SessionWrite::RetainSet {
                    topic: text(topic),
                    message: Box::new(message(topic, QoS::AtLeastOnce)),
                }
            }
            24 => {
                let id = 1 + self.rng.below(3);
                let mut message = message(&format!("d/{id}"), QoS::ExactlyOnce);
                message.sub_ids.clear();
                SessionWrite::DelayedSet {
                    id,
                    delayed: Box::new(StoredDelayed {
                        due: SystemTime::UNIX_EPOCH + Duration::from_secs(self.rng.below(1_000)),
                        publisher: text(CLIENTS[c]),
                        message,
                    }),
                }
            }
            25 => SessionWrite::DelayedCleared {
                id: 1 + self.rng.below(3),
            },
            _ => SessionWrite::RetainCleared {
                topic: text(self.rng.name(&["r/1", "r/2", "r/3"])),
            },
        }
    }
}
