//! [`Durability`]: this turn's stored writes, the sends and acknowledgements held until the store has committed them, and the tickets other shards wait on; `durable.rs` feeds and releases it.

use crate::directory::SessionOwner;
use crate::message::Outgoing;
use crate::session::Session;
use crate::store::{QueueRead, StoreBatch, StoreJob, StoreState};
use codec::{MqttStr, Packet, PacketId};
use ring_runtime::{ConnId, ShardId};
use session_store::SessionExpiry;
use session_store::storage::{MessageSeq, SessionWrite, StoredMessage};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError};

/// Something sent once a ticket is durable.
#[derive(Debug)]
pub(super) enum HeldSend {
    Packet(Packet),
    /// A client's acknowledgement: once durable, it waits for the cluster too
    /// (`cluster_acks.rs`).
    Ack {
        packet: Packet,
        waits_for: super::held_acks::ClusterWait,
    },
    Publish {
        client_id: MqttStr,
        outgoing: Outgoing,
        packet_id: PacketId,
    },
}

#[derive(Debug)]
pub(super) struct Held {
    pub(super) ticket: u64,
    pub(super) conn: ConnId,
    pub(super) send: HeldSend,
    /// An acknowledgement of a client's packet (counted against its connection's bound).
    pub(super) counted: bool,
}

/// One turn's stored writes and what their acknowledgements wait for.
#[derive(Debug, Default)]
pub(super) struct TurnBatch {
    /// This turn's writes.
    pub(super) writes: Vec<SessionWrite>,
    /// Origins whose copies this turn enqueued, with their tickets.
    pub(super) confirms: Vec<(ShardId, u64)>,
    /// Shards this turn sent QoS 1/2 copies to (they confirm this ticket).
    pub(super) needs: Vec<ShardId>,
    /// QoS 1/2 copies for other shards were routed this turn.
    pub(super) remote_copies: bool,
    /// Something was held for this turn's ticket.
    pub(super) held_this_turn: bool,
}

/// Reads of on-disk queues: those asked this turn and those not yet taken back.
#[derive(Debug, Default)]
pub(super) struct QueueReads {
    /// Reads asked for this turn (sent behind this turn's batch).
    pub(super) reads: Vec<QueueRead>,
    /// The number of the next read.
    pub(super) next_read: u64,
    /// Reads asked for and not yet taken back (no look at the store's results while 0).
    pub(super) reads_outstanding: usize,
}

/// This shard's persistence state.
#[derive(Debug)]
pub(super) struct Durability {
    /// Where batches go (`None`: nothing is stored).
    pub(super) sender: Option<SyncSender<StoreJob>>,
    /// The store thread's state (`None`: nothing is stored): spare write buffers come from it.
    pub(super) store: Option<Arc<StoreState>>,
    /// Whether acknowledgements wait for the disk (`sync = "batch"`).
    pub(super) acks_wait: bool,
    /// This turn's writes and what they wait for.
    pub(super) batch: TurnBatch,
    /// The ticket of this turn's batch.
    pub(super) ticket: u64,
    pub(super) held: VecDeque<Held>,
    /// Acknowledgements held per connection: a connection with `limits.receive_maximum` of
    /// them is parked (its further packets wait in its carry) until some are sent, so a stalled
    /// disk bounds what a client can make the broker hold.
    pub(super) held_acks: super::FastMap<ConnId, u32>,
    /// Submitted tickets that wait for other shards' confirmations, in order.
    pub(super) waits: VecDeque<(u64, Vec<ShardId>)>,
    /// Reads of on-disk queues.
    pub(super) queue_reads: QueueReads,
    /// Jobs the full channel refused, sent first next turn.
    pub(super) unsent: VecDeque<StoreJob>,
}

impl Durability {
    /// The state for a shard whose batches go to `store`'s thread.
    pub(super) fn new(store: Option<Arc<StoreState>>, acks_wait: bool) -> Self {
        let sender = store.as_ref().and_then(|store| store.sender());
        Self {
            acks_wait: acks_wait && sender.is_some(),
            sender,
            store,
            batch: TurnBatch::default(),
            ticket: 1,
            held: VecDeque::new(),
            held_acks: super::FastMap::default(),
            waits: VecDeque::new(),
            queue_reads: QueueReads {
                next_read: 1,
                ..QueueReads::default()
            },
            unsent: VecDeque::new(),
        }
    }

    /// Asks for up to `limit` messages of `client_id`'s on-disk queue above `after`; the
    /// request's number (the result comes back through `StoreState::take_reads`).
    pub(super) fn request_read(
        &mut self,
        shard: ShardId,
        client_id: MqttStr,
        after: u64,
        limit: usize,
    ) -> u64 {
        let id = self.queue_reads.next_read;
        self.queue_reads.next_read += 1;
        self.queue_reads.reads_outstanding += 1;
        self.queue_reads.reads.push(QueueRead {
            shard,
            id,
            client_id,
            after,
            limit,
        });
        id
    }

    /// Whether anything is stored.
    pub(super) fn enabled(&self) -> bool {
        self.sender.is_some()
    }

    /// Whether acknowledgements wait for the disk.
    pub(super) fn acks_wait(&self) -> bool {
        self.acks_wait
    }

    /// The ticket of this turn's batch, if acknowledgements wait for the disk and the turn has
    /// written something so far.
    pub(super) fn ticket_of_this_turns_writes(&self) -> Option<u64> {
        (self.acks_wait && !self.batch.writes.is_empty()).then_some(self.ticket)
    }

    /// The ticket copies routed this turn carry (when acknowledgements wait).
    pub(super) fn confirm_ticket(&self) -> Option<u64> {
        self.acks_wait.then_some(self.ticket)
    }

    /// Whether a session with `expiry` is stored (persistence on, and it outlives its
    /// connection).
    pub(super) fn stores(&self, expiry: SessionExpiry) -> bool {
        self.enabled() && expiry != SessionExpiry::OnClose
    }

    /// Records `write` if a session with `expiry` is stored (built only then).
    pub(super) fn record_if(
        &mut self,
        expiry: SessionExpiry,
        write: impl FnOnce() -> SessionWrite,
    ) {
        if self.stores(expiry) {
            self.batch.writes.push(write());
        }
    }

    /// Records a stored session's connection-scoped state (protocol, expiry, will as it is now)
    /// and the identity it belongs to.
    pub(super) fn record_saved(&mut self, session: &Session, owner: &SessionOwner) {
        self.record(SessionWrite::SessionSaved {
            client_id: session.client_id.clone(),
            protocol: session.protocol,
            expiry: session.expiry,
            will: session.will.as_deref().cloned().map(Box::new),
            owner: Box::new(owner.to_stored()),
        });
    }

    /// Records a write of this turn. An `InflightSent` of the message this turn's last write
    /// queued becomes one `MessageSent` with it (a connected subscriber's copy is usually
    /// queued and sent at once: one write to build, move and plan instead of two).
    pub(super) fn record(&mut self, write: SessionWrite) {
        if !self.enabled() {
            return;
        }
        let write = match write {
            SessionWrite::InflightSent {
                client_id,
                seq,
                packet_id,
            } => match self.take_last_queued(&client_id, seq) {
                Some(message) => SessionWrite::MessageSent {
                    client_id,
                    seq,
                    packet_id,
                    message,
                },
                None => SessionWrite::InflightSent {
                    client_id,
                    seq,
                    packet_id,
                },
            },
            write => write,
        };
        self.batch.writes.push(write);
    }

    /// The message of this turn's last write, taken out with it, if that write queued `seq`
    /// for `client_id`.
    pub(super) fn take_last_queued(
        &mut self,
        client_id: &MqttStr,
        seq: MessageSeq,
    ) -> Option<Box<StoredMessage>> {
        let SessionWrite::MessageQueued {
            client_id: queued_for,
            seq: queued,
            ..
        } = self.batch.writes.last()?
        else {
            return None;
        };
        if *queued != seq || queued_for != client_id {
            return None;
        }
        match self.batch.writes.pop() {
            Some(SessionWrite::MessageQueued { message, .. }) => Some(message),
            _ => None,
        }
    }

    /// QoS 1/2 copies went to another shard's sessions this turn.
    pub(super) fn routed_remote_copies(&mut self) {
        self.batch.remote_copies = true;
    }

    /// `shard` was sent this turn's ticket with its copies.
    pub(super) fn needs_confirmation(&mut self, shard: ShardId) {
        if !self.batch.needs.contains(&shard) {
            self.batch.needs.push(shard);
        }
    }

    /// Copies from `origin` carrying its `ticket` were handled here.
    pub(super) fn confirm(&mut self, origin: ShardId, ticket: u64) {
        match self.batch.confirms.iter_mut().find(|(o, _)| *o == origin) {
            Some((_, t)) => *t = (*t).max(ticket),
            None => self.batch.confirms.push((origin, ticket)),
        }
    }

    /// Whether an acknowledgement sent now must wait for this turn's batch.
    pub(super) fn ack_must_wait(&self) -> bool {
        self.acks_wait
            && (!self.batch.writes.is_empty() || self.batch.remote_copies || !self.held.is_empty())
    }

    /// Holds `send` for this turn's ticket; for a counted acknowledgement, the number its
    /// connection now has held.
    pub(super) fn hold(&mut self, conn: ConnId, send: HeldSend, counted: bool) -> u32 {
        self.batch.held_this_turn = true;
        self.held.push_back(Held {
            ticket: self.ticket,
            conn,
            send,
            counted,
        });
        if !counted {
            return 0;
        }
        let count = self.held_acks.entry(conn).or_insert(0);
        *count += 1;
        *count
    }

    /// A counted acknowledgement of `conn` was sent; whether the connection is now under its
    /// bound again (`limit`).
    pub(super) fn released_ack(&mut self, conn: ConnId, limit: u32) -> bool {
        let Some(count) = self.held_acks.get_mut(&conn) else {
            return false;
        };
        *count -= 1;
        let left = *count;
        if left == 0 {
            self.held_acks.remove(&conn);
        }
        left + 1 == limit
    }

    /// Acknowledgements `conn` has held now.
    pub(super) fn held_acks(&self, conn: ConnId) -> u32 {
        self.held_acks.get(&conn).copied().unwrap_or(0)
    }

    /// Hands this turn's batch to the store thread (after any the channel refused before).
    pub(super) fn submit(&mut self, shard: ShardId) {
        let Some(sender) = &self.sender else {
            return;
        };
        // A ticket that went out with copies (`needs`) is used up even with nothing else to
        // commit: the shards confirm it, and a later turn must not reuse it.
        let has_work = !self.batch.writes.is_empty()
            || !self.batch.confirms.is_empty()
            || self.batch.held_this_turn
            || !self.batch.needs.is_empty();
        if has_work {
            let spare = self.spare_writes(shard, self.batch.writes.len());
            // Only a ticket something waits for keeps its confirmations (so `waits` never
            // outgrows `held`).
            if !self.batch.needs.is_empty() && self.batch.held_this_turn {
                self.waits
                    .push_back((self.ticket, std::mem::take(&mut self.batch.needs)));
            }
            self.unsent.push_back(StoreJob::Batch(StoreBatch {
                shard,
                ticket: self.ticket,
                writes: std::mem::replace(&mut self.batch.writes, spare),
                confirms: std::mem::take(&mut self.batch.confirms),
            }));
            self.ticket += 1;
        }
        self.unsent
            .extend(self.queue_reads.reads.drain(..).map(StoreJob::Read));
        self.batch.needs.clear();
        self.batch.remote_copies = false;
        self.batch.held_this_turn = false;
        while let Some(batch) = self.unsent.pop_front() {
            match sender.try_send(batch) {
                Ok(()) => {}
                Err(TrySendError::Full(batch)) => {
                    self.unsent.push_front(batch);
                    break;
                }
                Err(TrySendError::Disconnected(_)) => {
                    // The store thread ended (it failed, and stops the broker): nothing more
                    // becomes durable, so nothing held is ever sent.
                    self.unsent.clear();
                    break;
                }
            }
        }
    }

    /// An empty buffer for the next turn's writes: a spare one the store thread gave back, if
    /// any, else one with room for `last` writes (this turn's count: the next turn of a loaded
    /// shard writes about as many, and a buffer grown step by step copies itself each time),
    /// up to the largest buffer the store thread keeps.
    pub(super) fn spare_writes(&self, shard: ShardId, last: usize) -> Vec<SessionWrite> {
        (self.store.as_ref())
            .and_then(|store| store.spare_writes(shard))
            .unwrap_or_else(|| Vec::with_capacity(last.min(crate::store::SPARE_BUFFER_WRITES)))
    }

    /// The next held item whose ticket is durable and confirmed.
    pub(super) fn pop_ready(
        &mut self,
        durable: u64,
        confirmed: impl Fn(ShardId) -> u64,
    ) -> Option<Held> {
        let ticket = self.held.front()?.ticket;
        if ticket > durable {
            return None;
        }
        while self.waits.front().is_some_and(|(t, _)| *t < ticket) {
            self.waits.pop_front();
        }
        if let Some((t, shards)) = self.waits.front()
            && *t == ticket
            && !shards.iter().all(|shard| confirmed(*shard) >= ticket)
        {
            return None;
        }
        self.held.pop_front()
    }

    /// Whether a first send of `outgoing` must wait for its `InflightSent` to be durable: a
    /// stored QoS 2 copy does (a restart must re-send it under the packet id the subscriber
    /// saw, or it would be delivered twice). A QoS 1 copy goes at once: after a crash it is
    /// delivered again, as QoS 1 allows, and a copy acknowledged before its group commit
    /// leaves nothing to write. Copies of one QoS keep their order (MQTT's ordered topics are
    /// per QoS); a QoS 1 copy may overtake a QoS 2 one waiting for the disk.
    pub(super) fn publish_must_wait(&self, outgoing: &Outgoing) -> bool {
        self.acks_wait() && outgoing.seq != 0 && outgoing.qos == codec::QoS::ExactlyOnce
    }

    /// Holds the first send of a stored copy until its `InflightSent` is durable.
    pub(super) fn hold_publish(
        &mut self,
        conn: ConnId,
        client_id: &MqttStr,
        outgoing: Outgoing,
        packet_id: PacketId,
    ) {
        let send = HeldSend::Publish {
            client_id: client_id.clone(),
            outgoing,
            packet_id,
        };
        self.hold(conn, send, false);
    }

    /// Stored copies that left the queue unsent: gone from the store too.
    pub(super) fn forget_stored_copies(&mut self, client_id: &MqttStr, copies: &[Outgoing]) {
        for copy in copies.iter().filter(|c| c.seq != 0) {
            self.record(SessionWrite::MessageDropped {
                client_id: client_id.clone(),
                seq: copy.seq,
            });
        }
    }
}
