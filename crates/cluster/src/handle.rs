//! [`ClusterLink`]: what the shards hold of the cluster thread (bounded queues towards it,
//! its counters), and [`ClusterQueues`], the receiving ends the thread takes at start.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::counters::ClusterCounters;
use super::interest_queue::InterestQueue;
use super::journal_writer::JournalTurn;
use super::mirror_queue::{MirrorFence, MirrorWork};
use super::settled::Settled;
use crate::settings::ClusterSettings;
use broker_api::Message;
use broker_api::cluster::{ClaimRequest, JournalEntry, MirrorOp};

/// A message on its way to NATS.
#[derive(Debug)]
pub(crate) struct Outbound {
    pub message: Arc<Message>,
    /// Its node served the matching shared subscriptions itself (NATS was down when it was
    /// published): the other nodes' queue groups must not serve them again.
    pub shares_served: bool,
    /// A QoS 1/2 message from a client whose acknowledgement waits: its shard and number
    /// there, settled once it is sent or kept (`settled.rs`).
    pub settle: Option<(ring_runtime::ShardId, u64)>,
    /// A QoS 1/2 message: until when it is published again while JetStream does not
    /// acknowledge it (`cluster.ack_timeout_ms` after it was handed over).
    pub deadline: Option<std::time::Instant>,
}

/// What the shards hold of the cluster link.
#[derive(Debug)]
pub struct ClusterLink {
    outbound: mpsc::Sender<Outbound>,
    interest: Arc<InterestQueue>,
    claims: mpsc::Sender<ClaimRequest>,
    mirror: mpsc::Sender<MirrorWork>,
    journal: mpsc::Sender<JournalTurn>,
    /// Whether QoS 2 deliveries are journaled (`cluster.qos2_journal`, with a replay window).
    journaled: bool,
    /// `cluster.qos2_journal_wait_ms` (`None`: until kept).
    journal_wait: Option<std::time::Duration>,
    /// How far each shard's journal turns have settled.
    pub journal_settled: Arc<Settled>,
    /// The link's counters.
    pub counters: Arc<ClusterCounters>,
    /// How far each shard's messages have settled.
    pub settled: Arc<Settled>,
    /// `cluster.ack_timeout_ms`.
    pub ack_timeout: std::time::Duration,
    /// `cluster.ack_while_disconnected`.
    pub ack_while_disconnected: bool,
}

/// The receiving ends the cluster thread takes at start.
#[derive(Debug)]
pub struct ClusterQueues {
    pub(super) outbound: mpsc::Receiver<Outbound>,
    pub(super) interest: Arc<InterestQueue>,
    pub(super) claims: mpsc::Receiver<ClaimRequest>,
    pub(super) mirror: mpsc::Receiver<MirrorWork>,
    /// What a release waits on for the mirror writes queued before it.
    pub(super) mirror_fence: MirrorFence,
    pub(super) settled: Arc<Settled>,
    pub(super) journal: mpsc::Receiver<JournalTurn>,
    pub(super) journal_settled: Arc<Settled>,
}

impl ClusterLink {
    /// A link bounded by `settings` for `shards` shards, and the queues its thread will read.
    pub fn new(settings: &ClusterSettings, shards: usize) -> (Self, ClusterQueues) {
        let settled = Arc::new(Settled::new(shards));
        let (outbound, outbound_rx) = mpsc::channel(settings.max_outbound_messages);
        let interest = Arc::new(InterestQueue::default());
        let interest_rx = Arc::clone(&interest);
        let (claims, claims_rx) = mpsc::channel(settings.max_outbound_messages);
        let (mirror, mirror_rx) = mpsc::channel(settings.max_outbound_messages);
        let (journal, journal_rx) = mpsc::channel(settings.max_outbound_messages);
        let journal_settled = Arc::new(Settled::new(shards));
        let link = Self {
            outbound,
            interest,
            claims,
            mirror,
            journal,
            journaled: settings.qos2_journal && settings.replay_window.is_some(),
            journal_wait: settings.qos2_journal_wait,
            journal_settled: Arc::clone(&journal_settled),
            counters: Arc::new(ClusterCounters::default()),
            settled: Arc::clone(&settled),
            ack_timeout: settings.ack_timeout,
            ack_while_disconnected: settings.ack_while_disconnected,
        };
        let queues = ClusterQueues {
            outbound: outbound_rx,
            interest: interest_rx,
            claims: claims_rx,
            mirror: mirror_rx,
            mirror_fence: MirrorFence::new(link.mirror.clone()),
            settled,
            journal: journal_rx,
            journal_settled,
        };
        (link, queues)
    }

    /// Hands a locally published message to the cluster (`shares_served`, `settle`: see
    /// [`Outbound`]); a full queue drops it, counted, and `false` says so. While NATS is down
    /// the queue is the node's buffer.
    pub fn send(
        &self,
        message: &Arc<Message>,
        shares_served: bool,
        settle: Option<(ring_runtime::ShardId, u64)>,
    ) -> bool {
        let reliable = message.qos != codec::QoS::AtMostOnce;
        let outbound = Outbound {
            message: Arc::clone(message),
            shares_served,
            settle,
            deadline: reliable.then(|| std::time::Instant::now() + self.ack_timeout),
        };
        if self.outbound.try_send(outbound).is_err() {
            ClusterCounters::drop_one(
                &self.counters.dropped_queue_full,
                "cluster.max_outbound_messages are waiting for NATS",
            );
            return false;
        }
        if let Some((shard, number)) = settle {
            self.settled.handed(shard, number);
        }
        true
    }

    /// Whether the main NATS connection is up.
    pub fn connected(&self) -> bool {
        self.counters
            .connected
            .load(std::sync::atomic::Ordering::Relaxed)
            == 1
    }

    /// Asks the cluster whether this node may own a client id; `false` when
    /// `cluster.max_outbound_messages` questions wait already.
    pub fn claim(&self, request: ClaimRequest) -> bool {
        self.claims.try_send(request).is_ok()
    }

    /// Hands a mirror operation to the cluster thread; a full queue drops it, counted.
    pub fn mirror(&self, op: MirrorOp) {
        if self.mirror.try_send(MirrorWork::Op(op)).is_err() {
            ClusterCounters::drop_one(
                &self.counters.mirror_failures,
                "cluster.max_outbound_messages mirror writes are waiting",
            );
        }
    }

    /// Hands one shard turn's QoS 2 delivery steps to the journal (see
    /// `broker_api::ClusterPort::journal`); `false` when QoS 2 deliveries are not journaled, or
    /// the queue is full (counted): nothing waits for them. Before the journal is open they
    /// wait for it (within `cluster.qos2_journal_wait_ms`, if set).
    pub fn journal(
        &self,
        shard: ring_runtime::ShardId,
        number: u64,
        entries: Vec<JournalEntry>,
    ) -> bool {
        if !self.journaled {
            return false;
        }
        let steps = entries.len() as u64;
        let turn = JournalTurn {
            shard,
            number,
            entries,
            deadline: self
                .journal_wait
                .map(|wait| std::time::Instant::now() + wait),
        };
        if self.journal.try_send(turn).is_err() {
            ClusterCounters::add(&self.counters.journal_failures, steps.saturating_sub(1));
            ClusterCounters::drop_one(
                &self.counters.journal_failures,
                "cluster.max_outbound_messages shard turns wait for the delivery journal; QoS 2 steps leave unjournaled",
            );
            return false;
        }
        self.journal_settled.handed(shard, number);
        true
    }

    /// Reports one more (`delta` 1) or one fewer (-1) local subscription to `filter`.
    /// Interest changes are never dropped (a lost one would leave a NATS subscription
    /// forever or miss one).
    pub fn interest(&self, filter: &str, delta: i32) {
        self.interest.add(filter, delta);
    }
}

impl Drop for ClusterLink {
    fn drop(&mut self) {
        self.interest.close();
    }
}
