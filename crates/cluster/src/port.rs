//! [`ClusterLink`] as the shards see it: `broker_api::ClusterPort`.

use std::sync::Arc;

use broker_api::cluster::{ClaimRequest, JournalEntry, MirrorOp};
use broker_api::{ClusterFigures, ClusterPort, Message};
use ring_runtime::ShardId;

use super::counters::ClusterCounters;
use super::handle::ClusterLink;

impl ClusterPort for ClusterLink {
    fn send(
        &self,
        message: &Arc<Message>,
        shares_served: bool,
        settle: Option<(ShardId, u64)>,
    ) -> bool {
        ClusterLink::send(self, message, shares_served, settle)
    }

    fn connected(&self) -> bool {
        ClusterLink::connected(self)
    }

    fn acks_wait(&self) -> bool {
        !self.ack_while_disconnected || ClusterLink::connected(self)
    }

    fn interest(&self, filter: &str, delta: i32) {
        ClusterLink::interest(self, filter, delta);
    }

    fn claim(&self, request: ClaimRequest) -> bool {
        ClusterLink::claim(self, request)
    }

    fn mirror(&self, op: MirrorOp) {
        ClusterLink::mirror(self, op);
    }

    fn journal(&self, shard: ShardId, number: u64, entries: Vec<JournalEntry>) -> bool {
        ClusterLink::journal(self, shard, number, entries)
    }

    fn journal_settled(&self, shard: ShardId) -> u64 {
        self.journal_settled.of(shard)
    }

    fn drop_inbound(&self, why: &'static str) {
        ClusterCounters::drop_one(&self.counters.dropped_inbound, why);
    }

    fn settled(&self, shard: ShardId) -> u64 {
        self.settled.of(shard)
    }

    fn take_failed(&self, shard: ShardId, number: u64) -> bool {
        self.settled.take_failed(shard, number)
    }

    fn ack_timeout(&self) -> std::time::Duration {
        self.ack_timeout
    }

    fn count_refused_ack(&self) {
        ClusterCounters::add(&self.counters.acks_refused, 1);
    }

    fn figures(&self) -> ClusterFigures {
        self.counters.figures()
    }

    fn nodes(&self) -> Vec<broker_api::ClusterNode> {
        let listed = self.counters.totals.listed.lock();
        listed.map_or_else(
            |poisoned| poisoned.into_inner().clone(),
            |rows| rows.clone(),
        )
    }
}
