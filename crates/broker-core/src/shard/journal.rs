//! The shard's side of the delivery journal (docs/cluster.md, "Exactly once across a node's
//! death"). With `[cluster]`, a QoS 2 PUBLISH to a session mirrored in JetStream, and the
//! PUBREL that answers its PUBREC, may leave only once the cluster has written the step to the
//! journal: the turn's steps go to the cluster thread together at the end of the turn, and the
//! connections they were queued on stop writing (`ShardCtx::hold_writing`: what is queued
//! after them waits too, so a connection's packets keep their order) until the journal has
//! settled the turn's number. Whoever takes the session over after this node's death then
//! knows which of the messages it reads back the client has.
//!
//! Every message received from a client in a cluster gets its key here ([`MessageKeys`]): the
//! journal's name for it, carried through NATS with it.

use std::time::Duration;

use codec::{MqttStr, PacketId};
use ring_runtime::ConnId;

use super::parts::ClusterSide;
use super::{BrokerShard, Ctx};
use broker_api::cluster::{JournalEntry, JournalStep};

/// Completed steps wait for the next steps that hold packets, to go in the same write, at
/// most this long (or this many): each write is a JetStream publish replicated on its
/// servers, and a completion lost with the node costs only one PUBREL more.
const COMPLETIONS_WAIT: Duration = Duration::from_millis(100);
const COMPLETIONS_MAX: usize = 256;

impl BrokerShard {
    /// A QoS 2 PUBLISH of the message `key` under `packet_id` was queued on `conn`: journaled
    /// when its session is mirrored, and the connection holds it until the step is written.
    pub(super) fn journal_sent(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        packet_id: PacketId,
        key: u64,
    ) {
        self.journal_step(ctx, conn, packet_id, JournalStep::Sent { key });
    }

    /// The PUBREL answering a PUBREC for `packet_id` is about to be queued on `conn`.
    pub(super) fn journal_released(&mut self, ctx: &mut Ctx, conn: ConnId, packet_id: PacketId) {
        self.journal_step(ctx, conn, packet_id, JournalStep::Released);
    }

    /// The PUBCOMP for `packet_id` came on `conn`: journaled, nothing held (lost with the
    /// node, it costs one PUBREL more after the node's death).
    pub(super) fn journal_completed(&mut self, ctx: &Ctx, conn: ConnId, packet_id: PacketId) {
        if self.shared.links.cluster.is_none() {
            return;
        }
        let Some(client_id) = self.journaled_client(conn) else {
            return;
        };
        let journal = &mut self.cluster_side.journal;
        journal.completions.push(JournalEntry {
            client_id,
            packet_id: packet_id.get(),
            step: JournalStep::Completed,
        });
        journal.completions_since.get_or_insert(ctx.now());
    }

    /// The client id of `conn`'s session when its QoS 2 steps are journaled: its session is
    /// mirrored (no node takes the others over after this one's death).
    fn journaled_client(&self, conn: ConnId) -> Option<MqttStr> {
        let subscriber = self.conns.get(&conn)?.session()?;
        let client_id = self.sessions.client_id(subscriber)?;
        let mirrored = self.cluster_side.owning.mirrored.contains_key(client_id);
        mirrored.then(|| client_id.clone())
    }

    fn journal_step(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        packet_id: PacketId,
        step: JournalStep,
    ) {
        if self.shared.links.cluster.is_none() {
            return;
        }
        let Some(client_id) = self.journaled_client(conn) else {
            return;
        };
        self.cluster_side.journal_entry(client_id, packet_id, step);
        let journal = &mut self.cluster_side.journal;
        if journal.held_now.last() != Some(&conn) {
            journal.held_now.push(conn);
        }
        ctx.hold_writing(conn);
    }

    /// At the end of a turn: the turn's steps go to the cluster thread (their connections keep
    /// holding them until it settles them); when it keeps none (no journal, queue full,
    /// counted) they are let go at once.
    pub(super) fn hand_journal(&mut self, ctx: &mut Ctx) {
        let journal = &mut self.cluster_side.journal;
        let completions_due = journal.completions.len() >= COMPLETIONS_MAX
            || (journal.completions_since)
                .is_some_and(|since| ctx.now().duration_since(since) >= COMPLETIONS_WAIT);
        if journal.entries.is_empty() && !completions_due {
            return;
        }
        let mut entries = std::mem::take(&mut journal.entries);
        entries.append(&mut journal.completions);
        journal.completions_since = None;
        let mut conns = std::mem::take(&mut journal.held_now);
        conns.sort_unstable();
        conns.dedup();
        let number = journal.last + 1;
        let handed = (self.shared.links.cluster.as_ref())
            .is_some_and(|link| link.journal(self.id, number, entries));
        if !handed {
            for conn in conns {
                if !journal.held.contains_key(&conn) {
                    ctx.release_writing(conn);
                }
            }
            return;
        }
        journal.last = number;
        for &conn in &conns {
            journal.held.insert(conn, number);
        }
        journal.waiting.push_back((number, conns));
    }

    /// Lets the connections whose latest steps the journal settled write again.
    pub(super) fn release_journal_holds(&mut self, ctx: &mut Ctx) {
        let journal = &mut self.cluster_side.journal;
        if journal.waiting.is_empty() {
            return;
        }
        let settled = (self.shared.links.cluster.as_ref())
            .map_or(u64::MAX, |link| link.journal_settled(self.id));
        while journal.waiting.front().is_some_and(|(n, _)| *n <= settled) {
            let Some((number, conns)) = journal.waiting.pop_front() else {
                break;
            };
            for conn in conns {
                if journal.held.get(&conn) == Some(&number) {
                    journal.held.remove(&conn);
                    ctx.release_writing(conn);
                }
            }
        }
    }
}

impl ClusterSide {
    fn journal_entry(&mut self, client_id: MqttStr, packet_id: PacketId, step: JournalStep) {
        self.journal.entries.push(JournalEntry {
            client_id,
            packet_id: packet_id.get(),
            step,
        });
    }
}
