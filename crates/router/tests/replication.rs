//! Replicas fed concurrently by several origin "shards" over crossbeam channels (standing in for
//! the runtime's mailboxes): every replica applies changes strictly in sequence order, its
//! matches at every sampled point equal a sequential reference at the same point, and all
//! replicas converge to the same table.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, unbounded};
use router::{
    ChangeSeq, Matches, Publisher, QoS, Replica, ReplicaConfig, Sequenced, Sequencer, SubscriberId,
    Subscription, SubscriptionChange, SubscriptionFilter, SubscriptionId, SubscriptionOptions,
    SubscriptionTable, TopicName,
};

const ORIGINS: u64 = 3;
const REPLICAS: usize = 4;
const CHANGES_PER_ORIGIN: u64 = 1_500;
const TOTAL: u64 = ORIGINS * CHANGES_PER_ORIGIN;
const SAMPLE_EVERY: u64 = 25;
const FILTERS: [&str; 9] = [
    "a/b",
    "a/+",
    "a/#",
    "#",
    "+/b",
    "a//b",
    "c",
    "$share/g/a/+",
    "$share/h/#",
];
const TOPICS: [&str; 5] = ["a/b", "a/c", "$x/b", "c", "a//b"];

/// A tiny deterministic generator for the test's random choices.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

fn random_change(rng: &mut XorShift, origin: u64) -> SubscriptionChange {
    let subscriber = SubscriberId(origin * 1_000 + rng.below(8));
    let filter: SubscriptionFilter = FILTERS[rng.below(FILTERS.len() as u64) as usize]
        .parse()
        .expect("valid");
    if rng.below(10) < 3 {
        return SubscriptionChange::Unsubscribe { subscriber, filter };
    }
    let options = SubscriptionOptions {
        qos: QoS::from_u8(rng.below(3) as u8).expect("0..3"),
        no_local: rng.below(4) == 0,
        ..SubscriptionOptions::default()
    };
    let id = SubscriptionId::new(rng.below(4) as u32);
    SubscriptionChange::Subscribe {
        subscriber,
        filter,
        options,
        id,
    }
}

/// One origin shard: stamps each change and sends it to every replica at once. Now and then it
/// redelivers a change to one replica (which must ignore it), and now and then it stamps two
/// changes and sends the later one first, so that every replica certainly sees a gap.
fn origin(
    origin: u64,
    sequencer: &Sequencer,
    mailboxes: &[Sender<Sequenced<SubscriptionChange>>],
) -> Vec<Sequenced<SubscriptionChange>> {
    let mut rng = XorShift(0x9E37_79B9 + origin);
    let mut log = Vec::new();
    let mut held_back: Option<Sequenced<SubscriptionChange>> = None;
    for n in 0..CHANGES_PER_ORIGIN {
        let stamped = Sequenced {
            seq: sequencer.next(),
            change: random_change(&mut rng, origin),
        };
        if n % 50 == 0 && n + 1 < CHANGES_PER_ORIGIN {
            held_back = Some(stamped.clone());
            log.push(stamped);
            continue;
        }
        for mailbox in mailboxes {
            mailbox.send(stamped.clone()).expect("replica alive");
            if let Some(earlier) = &held_back {
                mailbox.send(earlier.clone()).expect("replica alive");
            }
        }
        held_back = None;
        if n % 97 == 0 {
            let target = &mailboxes[rng.below(mailboxes.len() as u64) as usize];
            target.send(stamped.clone()).expect("replica alive");
        }
        if n % 7 == 0 {
            thread::yield_now();
        }
        log.push(stamped);
    }
    log
}

/// What a replica observed at one point: changes applied before it, topic, plain deliveries
/// (subscriber, qos, ids) and the share names that delivered.
type Sample = (u64, usize, Vec<(u64, QoS, Vec<u32>)>, BTreeSet<String>);

fn observe(table: &mut SubscriptionTable, topic: usize, out: &mut Matches) -> Sample {
    let name: TopicName = TOPICS[topic].parse().expect("valid");
    let publisher = Publisher {
        subscriber: Some(SubscriberId(1_001)),
        client_id: b"p",
    };
    table.match_topic(&name, &publisher, out);
    let plain = out
        .iter()
        .filter(|d| d.shared.is_none())
        .map(|d| {
            (
                d.subscriber.0,
                d.qos,
                d.subscription_ids.iter().map(|i| i.get()).collect(),
            )
        })
        .collect();
    let shared = out
        .iter()
        .filter_map(|d| d.shared)
        .map(|s| s.share_name().to_owned())
        .collect();
    (0, topic, plain, shared)
}

/// A replica's final table, its samples and the most changes it ever held waiting for a gap.
type ReplicaResult = (Vec<(String, Subscription)>, Vec<Sample>, usize);

/// One replica shard: applies changes as they arrive and matches in between.
fn replica(mailbox: Receiver<Sequenced<SubscriptionChange>>) -> ReplicaResult {
    let mut replica = Replica::new(ReplicaConfig::default());
    let mut out = Matches::new();
    let mut samples = Vec::new();
    let mut expected = 0_u64;
    let mut most_waiting = 0;
    while replica.next_expected().0 < TOTAL {
        // A generous bound that turns a stalled replica into a failure instead of a hang.
        let change = mailbox
            .recv_timeout(Duration::from_secs(60))
            .expect("every change arrives: a replica that stalls has lost its order");
        let applied = replica.receive(change, |seq, _, _| {
            assert_eq!(
                seq,
                ChangeSeq(expected),
                "changes applied strictly in order"
            );
            expected += 1;
        });
        most_waiting = most_waiting.max(replica.waiting());
        let done = replica.next_expected().0;
        if applied > 0 && done % SAMPLE_EVERY < applied as u64 {
            let mut sample = observe(
                replica.table_mut(),
                (done as usize) % TOPICS.len(),
                &mut out,
            );
            sample.0 = done;
            samples.push(sample);
        }
    }
    (replica.table().entries(), samples, most_waiting)
}

#[test]
fn replicas_apply_in_order_and_converge() {
    let sequencer = Arc::new(Sequencer::new());
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..REPLICAS).map(|_| unbounded()).unzip();
    let replicas: Vec<_> = receivers
        .into_iter()
        .map(|rx| thread::spawn(move || replica(rx)))
        .collect();
    let senders = Arc::new(senders);
    let origins: Vec<_> = (0..ORIGINS)
        .map(|o| {
            let (sequencer, senders) = (Arc::clone(&sequencer), Arc::clone(&senders));
            thread::spawn(move || origin(o, &sequencer, &senders))
        })
        .collect();
    let mut log: Vec<_> = origins
        .into_iter()
        .flat_map(|h| h.join().expect("origin ok"))
        .collect();
    drop(senders);
    let results: Vec<_> = replicas
        .into_iter()
        .map(|h| h.join().expect("replica ok"))
        .collect();

    log.sort_by_key(|s| s.seq);
    let seqs: Vec<u64> = log.iter().map(|s| s.seq.0).collect();
    assert_eq!(
        seqs,
        (0..TOTAL).collect::<Vec<_>>(),
        "the sequencer numbers every change once"
    );

    let mut samples: Vec<Sample> = results
        .iter()
        .flat_map(|(_, s, _)| s.iter().cloned())
        .collect();
    samples.sort_by_key(|s| s.0);
    assert!(samples.len() as u64 >= (TOTAL / SAMPLE_EVERY) * REPLICAS as u64 / 2);
    let mut reference = SubscriptionTable::default();
    let mut out = Matches::new();
    let mut applied = 0_u64;
    for sample in &samples {
        while applied < sample.0 {
            log[applied as usize].change.apply_to(&mut reference);
            applied += 1;
        }
        let mut expected = observe(&mut reference, sample.1, &mut out);
        expected.0 = sample.0;
        assert_eq!(
            &expected, sample,
            "replica state after {} changes",
            sample.0
        );
    }
    for stamped in &log[applied as usize..] {
        stamped.change.apply_to(&mut reference);
    }
    let final_entries = reference.entries();
    assert!(!final_entries.is_empty());
    for (entries, _, most_waiting) in &results {
        assert_eq!(
            entries, &final_entries,
            "replicas converge to the reference"
        );
        assert!(
            *most_waiting > 0,
            "every replica reordered at least one change"
        );
    }
}
