//! The shard's side of client id ownership across nodes (`cluster/ownership.rs`,
//! docs/cluster.md "Sessions across nodes"): a CONNECT with a client id the client chose waits
//! (`Phase::AwaitingSession`) while the cluster thread makes this node the id's owner, and
//! continues with the session another node released, if any; and the other way round, a
//! session another node takes over is released here: its connection closes with 0x8E and its
//! state leaves as a snapshot.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use codec::{Connect, ReasonCode};
use ring_runtime::ConnId;
use session_store::storage::{SessionWrite, decode_session_snapshot};
use session_store::{InflightState, SessionExpiry};
use tracing::{debug, warn};

use super::durability::Durability;
use super::owning::PendingOwnership;
use super::recover::rebuild_session;
use super::{BrokerShard, Ctx};
use crate::conn::Phase;
use crate::session::Session;
use crate::settings::requested_expiry_interval;
use crate::shared_parts::Persistence;
use broker_api::cluster::{ClaimRequest, Ownership, OwnershipAnswer};

impl BrokerShard {
    /// Asks the cluster to make this node the owner of `connect`'s client id; the CONNECT
    /// waits for the answer (`cluster.max_outbound_messages` questions waiting: 0x89).
    pub(super) fn ask_cluster_owner(&mut self, ctx: &mut Ctx, conn: ConnId, connect: Connect) {
        let Some(link) = &self.shared.links.cluster else {
            return self.claim_session(ctx, conn, connect, false, None);
        };
        self.cluster_side.owning.next_token += 1;
        let token = self.cluster_side.owning.next_token;
        let abandoned = Arc::new(AtomicBool::new(false));
        let request = ClaimRequest {
            client_id: connect.client_id.clone(),
            clean_start: connect.clean_start,
            keeps_session: !connect.clean_start || requested_expiry_interval(&connect) > 0,
            shard: self.id,
            conn,
            token,
            abandoned: Arc::clone(&abandoned),
        };
        if !link.claim(request) {
            debug!("CONNECT refused: cluster.max_outbound_messages ownership questions wait");
            return self
                .wire()
                .refuse_connect(ctx, conn, ReasonCode::ServerBusy);
        }
        if let Some(connection) = self.conns.get_mut(&conn) {
            connection.phase = Phase::AwaitingSession;
        }
        let pending = PendingOwnership {
            token,
            connect,
            abandoned,
        };
        self.cluster_side.owning.pending.insert(conn, pending);
    }

    /// The cluster answered a waiting CONNECT. A client gone meanwhile still gets a session
    /// released to it kept here (detached), never lost.
    pub(super) fn ownership_answered(&mut self, ctx: &mut Ctx, answer: OwnershipAnswer) {
        let Some(pending) = self.cluster_side.owning.pending.remove(&answer.conn) else {
            return;
        };
        if pending.token != answer.token {
            self.cluster_side
                .owning
                .pending
                .insert(answer.conn, pending);
            return;
        }
        let waiting = self
            .conns
            .get_mut(&answer.conn)
            .filter(|c| c.phase == Phase::AwaitingSession);
        if let Some(connection) = waiting {
            connection.phase = Phase::AwaitingConnect;
        }
        match answer.outcome {
            Ownership::Owned(snapshot) => {
                self.claim_session(ctx, answer.conn, pending.connect, false, snapshot);
            }
            Ownership::Unavailable => {
                debug!(client = %answer.client_id, "CONNECT refused: the session's node did not release it");
                self.wire()
                    .refuse_connect(ctx, answer.conn, ReasonCode::ServerUnavailable);
            }
        }
    }

    /// Rebuilds a session another node released, under `subscriber`, and makes it this
    /// node's: its subscriptions replicated to every shard, and (if the CONNECT's `expiry` is
    /// stored) every part of it written to the store. `None` if the snapshot does not decode
    /// (logged).
    pub(super) fn import_session(
        &mut self,
        ctx: &mut Ctx,
        snapshot: &[u8],
        subscriber: router::SubscriberId,
        expiry: SessionExpiry,
    ) -> Option<Box<Session>> {
        let mut stored = match decode_session_snapshot(snapshot) {
            Ok(stored) => stored,
            Err(e) => {
                warn!(error = %e, "cluster: a released session could not be read; the client starts afresh");
                return None;
            }
        };
        // This node's queue numbers: the other node's mean nothing here.
        for (seq, _) in &mut stored.queued {
            *seq = self.shared.persistence.new_seq();
        }
        // Stored (or not) as the new connection asks: `complete_connect` then finds it stored
        // already, and keeps or removes it.
        stored.expiry = expiry;
        // This node checks the identity that claimed it, whatever the other node recorded.
        stored.owner = self
            .shared
            .directory
            .owner_of(stored.client_id.as_str())
            .to_stored();
        self.forget_released_copy(&stored.client_id);
        self.cluster_side
            .mirror_imported(&self.shared.links, &stored.client_id);
        if self.durable.stores(expiry) {
            self.durable
                .record_imported(&self.shared.persistence, &stored);
        }
        let session = rebuild_session(
            &self.shared,
            &mut self.figures.gauges,
            &mut self.timers,
            stored,
            subscriber,
            ctx.now(),
        );
        for (_, subscription) in session.subscriptions.iter() {
            let change = router::SubscriptionChange::Subscribe {
                subscriber,
                filter: subscription.filter.clone(),
                options: subscription.options,
                id: subscription.id,
            };
            self.figures.broadcast(
                ctx,
                &self.shared.order,
                crate::message::Change::Subscription(change),
            );
        }
        Some(session)
    }
}

/// The stand-in for a QoS 2 message already released (its PUBREL owed): stored only to take
/// the store's path to that state, which drops it.
fn released_placeholder() -> session_store::storage::StoredMessage {
    session_store::storage::StoredMessage {
        topic: bytes::Bytes::new(),
        payload: bytes::Bytes::new(),
        qos: codec::QoS::ExactlyOnce,
        retain: false,
        properties: bytes::Bytes::new(),
        expires_at: None,
        sub_ids: Vec::new(),
        accepted_at: None,
        key: 0,
    }
}

impl Durability {
    /// Writes every part of an imported session to the store: its record, subscriptions,
    /// queue, inflight entries and inbound QoS 2 ids.
    fn record_imported(
        &mut self,
        persistence: &Persistence,
        stored: &session_store::storage::StoredSession,
    ) {
        let client_id = &stored.client_id;
        self.record(SessionWrite::SessionSaved {
            client_id: client_id.clone(),
            protocol: stored.protocol,
            expiry: stored.expiry,
            will: None,
            owner: Box::new(stored.owner.clone()),
        });
        for subscription in &stored.subscriptions {
            self.record(SessionWrite::Subscribed {
                client_id: client_id.clone(),
                filter: subscription.filter.clone(),
                options: subscription.options,
                id: subscription.id,
            });
        }
        for (seq, message) in &stored.queued {
            self.record(SessionWrite::MessageQueued {
                client_id: client_id.clone(),
                seq: *seq,
                message: Box::new(message.clone()),
            });
        }
        for (packet_id, state) in &stored.inflight {
            // The store's own path to each state: queued, then sent, then (PUBREL owed)
            // released, which drops the message (a placeholder serves there).
            let seq = persistence.new_seq();
            let message = match state {
                InflightState::AwaitingPubAck(m) | InflightState::AwaitingPubRec(m) => m.clone(),
                InflightState::AwaitingPubComp => released_placeholder(),
            };
            let (client_id, packet_id) = (client_id.clone(), *packet_id);
            self.record(SessionWrite::MessageQueued {
                client_id: client_id.clone(),
                seq,
                message: Box::new(message),
            });
            self.record(SessionWrite::InflightSent {
                client_id: client_id.clone(),
                seq,
                packet_id,
            });
            if matches!(state, InflightState::AwaitingPubComp) {
                self.record(SessionWrite::InflightReleased {
                    client_id,
                    packet_id,
                });
            }
        }
        for packet_id in &stored.awaiting_release {
            self.record(SessionWrite::Qos2Received {
                client_id: client_id.clone(),
                packet_id: *packet_id,
            });
        }
    }
}
