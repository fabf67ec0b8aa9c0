//! Retained messages kept by a shard: replicated to every shard's retained index and stored
//! (`[persistence]`) with, for a client's publish, when this node accepted it (a node of a
//! cluster compares that with the bucket's record after a restart: docs/cluster.md, "Retained
//! messages").

use std::sync::Arc;
use std::time::SystemTime;

use router::TopicName;
use session_store::storage::SessionWrite;
use tracing::debug;

use super::durability::Durability;
use super::parts::{Figures, Replication};
use super::publish::SYS_PREFIX;
use super::{BrokerShard, Ctx};
use crate::message::{Change, Message};
use crate::metrics::DropReason;
use crate::shared::Shared;
use crate::store::stored_retained;

impl BrokerShard {
    /// Keeps a retained message published on this node (`accepted_at`: when a client's
    /// publish was accepted; `None` for the broker's own).
    pub(super) fn keep_retained(
        &mut self,
        ctx: &mut Ctx,
        topic: &TopicName,
        message: &Arc<Message>,
        accepted_at: Option<SystemTime>,
    ) {
        let retaining = Retaining {
            topic,
            message,
            accepted_at,
        };
        (self.replication).retain(
            &mut self.durable,
            &self.figures,
            &self.shared,
            ctx,
            retaining,
        );
    }

    /// Keeps the topic's retained record from the cluster's bucket (routed to no one, never
    /// handed back to the cluster).
    pub(super) fn keep_retained_from_bucket(
        &mut self,
        ctx: &mut Ctx,
        topic: &TopicName,
        message: &Arc<Message>,
    ) {
        self.keep_retained(ctx, topic, message, None);
    }
}

/// A retained message to keep (an empty payload clears the topic's retained message).
struct Retaining<'a> {
    topic: &'a TopicName,
    message: &'a Arc<Message>,
    /// When this node accepted it from a client (wall clock, stored with it); `None` for one
    /// from the cluster's bucket or published by the broker itself.
    accepted_at: Option<SystemTime>,
}

impl Replication {
    /// Replicates a retained message (an empty payload clears the topic's retained message).
    fn retain(
        &mut self,
        durable: &mut Durability,
        figures: &Figures,
        shared: &Shared,
        ctx: &mut Ctx,
        retaining: Retaining<'_>,
    ) {
        let Retaining {
            topic,
            message,
            accepted_at,
        } = retaining;
        let limits = &shared.config.retained;
        let clear = message.publish.payload().is_empty();
        let replacing = self.replica.retained.get(topic).is_some();
        let full = self.replica.retained.len() >= limits.max_messages as usize
            || (self.replica.retained.total_bytes() + message.publish.payload().len()) as u64
                > limits.max_bytes;
        if !clear && full && !replacing {
            debug!(
                topic = topic.as_str(),
                "retained limit reached: message delivered, not retained"
            );
            figures.count_dropped(DropReason::RetainedFull, 1);
            return;
        }
        // `$SYS` values are the running broker's own: republished on their interval, never
        // stored (a restart would otherwise serve the last run's figures).
        if !topic.as_str().starts_with(SYS_PREFIX) {
            let write = match clear {
                true => SessionWrite::RetainCleared {
                    topic: message.publish.topic().clone(),
                },
                false => SessionWrite::RetainSet {
                    topic: message.publish.topic().clone(),
                    message: Box::new(stored_retained(message, ctx.now(), accepted_at)),
                },
            };
            durable.record(write);
        }
        let message = (!clear).then(|| Arc::clone(message));
        figures.broadcast(
            ctx,
            &shared.order,
            Change::Retain {
                topic: topic.clone(),
                message,
            },
        );
    }
}
