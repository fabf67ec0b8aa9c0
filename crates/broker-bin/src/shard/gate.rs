//! Acknowledgements that wait for replication: a SUBACK (and the retained messages after it) or
//! an UNSUBACK leaves only once every shard has applied the subscription change, so any PUBLISH
//! the broker receives after the client saw the acknowledgement is matched against it.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use codec::{MqttStr, Packet, QoS, SubscriptionId};
use ring_runtime::ConnId;
use router::SubscriptionFilter;

use super::timers::TimerPurpose;
use super::{BrokerShard, Ctx};

/// Retained messages owed to a new subscription once its SUBACK is out.
#[derive(Debug)]
pub(super) struct RetainedDue {
    pub filter: SubscriptionFilter,
    pub granted: QoS,
    pub id: Option<SubscriptionId>,
}

/// An acknowledgement waiting for every shard to reach `seq`.
#[derive(Debug)]
pub(super) struct Gated {
    /// The last change the acknowledgement depends on (`None`: none).
    pub seq: Option<u64>,
    pub conn: ConnId,
    pub client_id: MqttStr,
    pub packet: Packet,
    pub retained: Vec<RetainedDue>,
}

/// Acknowledgements in the order they were made (their sequence numbers only grow).
#[derive(Debug, Default)]
pub(super) struct GateQueue {
    waiting: VecDeque<Gated>,
    poll_armed: bool,
}

impl BrokerShard {
    /// The lowest change sequence every shard has applied up to (exclusive).
    fn applied_everywhere(&self) -> u64 {
        self.shared
            .applied
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .min()
            .unwrap_or(0)
    }

    /// Sends `gated` once every shard has applied its change.
    pub(super) fn send_when_applied(&mut self, ctx: &mut Ctx, gated: Gated) {
        self.gate.waiting.push_back(gated);
        self.release_gated(ctx);
    }

    /// Sends every acknowledgement whose change all shards have applied; polls while some wait.
    pub(super) fn release_gated(&mut self, ctx: &mut Ctx) {
        if self.gate.waiting.is_empty() {
            return;
        }
        let applied = self.applied_everywhere();
        while self
            .gate
            .waiting
            .front()
            .is_some_and(|g| g.seq.is_none_or(|seq| seq < applied))
        {
            let Some(gated) = self.gate.waiting.pop_front() else {
                break;
            };
            self.send_packet(ctx, gated.conn, &gated.packet);
            for due in gated.retained {
                self.send_retained(ctx, &gated.client_id, &due.filter, due.granted, due.id);
            }
        }
        if !self.gate.waiting.is_empty() && !self.gate.poll_armed {
            self.gate.poll_armed = true;
            let at = ctx.now()
                + self
                    .shared
                    .config
                    .queues
                    .backlog_retry
                    .min(std::time::Duration::from_millis(1));
            self.arm(ctx, at, TimerPurpose::Gate);
        }
    }

    /// The gate's poll timer fired.
    pub(super) fn gate_poll(&mut self, ctx: &mut Ctx) {
        self.gate.poll_armed = false;
        self.release_gated(ctx);
    }
}
