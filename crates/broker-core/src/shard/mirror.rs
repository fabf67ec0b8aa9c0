//! The shard's side of the session mirror in JetStream (`cluster/mirror.rs`, docs/cluster.md
//! "When a node dies"). With `[cluster]`, every session that outlives its connection is
//! mirrored while this node holds it:
//! - while its client is connected, its subscriptions, expiry and protocol (not its messages:
//!   they change with every delivery), written at the CONNECT and at every change of its
//!   subscriptions; with its messages too while the backlog it held at the CONNECT is not all
//!   acknowledged (`backlogs`);
//! - once its client has disconnected, its whole state, then every QoS 1/2 copy queued for it.
//!
//! When the session ends here, or moves to another node, nothing of it stays mirrored. When
//! this node dies, the node that takes the client id over rebuilds the session from the mirror.

use codec::MqttStr;
use session_store::SessionExpiry;
use session_store::storage::{encode_queued_message, encode_session_snapshot};

use super::parts::ClusterSide;
use super::{Ctx, FastSet};
use crate::message::Outgoing;
use crate::session::SessionAt;
use crate::session::{Session, Sessions};
use crate::shared_parts::Links;
use crate::store::{stored_message, stored_session_of};
use broker_api::cluster::MirrorOp;

/// What is mirrored of a session whose client is connected: its subscriptions, expiry and
/// protocol; its messages (queued and in flight) only `with_messages`, while the backlog it
/// held at its CONNECT is not all acknowledged. Why not always: they change with every
/// delivery, and what reached the session since its node's last heartbeat comes back from the
/// replay stream when the node dies (docs/cluster.md). Why then: a backlog was kept before
/// that heartbeat, and was lost with the node: the 300-fault run of seed 5050 on 045854f
/// (1,159.9 s) lost 95 to 98 of each publisher's messages to a session that came to a node with
/// 1,211 queued, the node killed 90 ms after the CONNECT. `None` for a session that ends with
/// its connection.
fn connected_snapshot(session: &Session, ctx: &Ctx, with_messages: bool) -> Option<bytes::Bytes> {
    if session.expiry == SessionExpiry::OnClose {
        return None;
    }
    let mut stored = stored_session_of(session, ctx.now());
    if !with_messages {
        stored.queued.clear();
        stored.inflight.clear();
    }
    stored.awaiting_release.clear();
    Some(bytes::Bytes::from(encode_session_snapshot(&stored)))
}

/// The copies `session` holds, queued or in flight (with their message).
fn held_copies(session: &Session) -> impl Iterator<Item = &Outgoing> {
    let in_flight = (session.inflight.iter()).filter_map(|(_, state)| state.message());
    session.queue.iter().chain(in_flight)
}

/// The keys of the QoS 1/2 messages `session` holds, queued or in flight (a message without
/// one, 0, is left out).
fn backlog_keys(session: &Session) -> FastSet<u64> {
    let reliable = held_copies(session).filter(|copy| copy.qos != codec::QoS::AtMostOnce);
    reliable
        .map(|copy| copy.message.key)
        .filter(|&key| key != 0)
        .collect()
}

/// Whether `session` still holds, queued or in flight, a message whose key is in `backlog`.
fn holds_any(session: &Session, backlog: &FastSet<u64>) -> bool {
    held_copies(session).any(|copy| backlog.contains(&copy.message.key))
}

impl ClusterSide {
    /// A session that outlives its connection lost it: its whole state is mirrored until the
    /// client comes back.
    pub(super) fn mirror_offline(&mut self, links: &Links, ctx: &Ctx, session: &Session) {
        let Some(link) = &links.cluster else {
            return;
        };
        if session.expiry == SessionExpiry::OnClose {
            return;
        }
        let mut stored = stored_session_of(session, ctx.now());
        // Marks the record as an offline session's: the node that recovers it after this
        // node's death replays what it missed from its last mirrored copy on, not from this
        // node's last heartbeat (docs/cluster.md, "When a node dies").
        stored.disconnected_at = Some(std::time::SystemTime::now());
        let snapshot = encode_session_snapshot(&stored);
        self.owning.backlogs.remove(&session.client_id);
        let mirrored = &mut self.owning.mirrored;
        let purge_queue = mirrored.insert(session.client_id.clone(), false) == Some(true);
        link.mirror(MirrorOp::Offline {
            client_id: session.client_id.clone(),
            snapshot: bytes::Bytes::from(snapshot),
            purge_queue,
        });
    }

    /// A session whose client is connected here, at its CONNECT: its subscriptions are
    /// mirrored (`connected_snapshot`), with its messages if it holds QoS 1/2 ones (its
    /// backlog, remembered until acknowledged), and what was mirrored while it was offline
    /// goes. A session that ends with its connection is not mirrored, and what was before goes.
    pub(super) fn mirror_connected(&mut self, links: &Links, ctx: &Ctx, session: &Session) {
        if links.cluster.is_none() {
            return;
        }
        let backlog = backlog_keys(session);
        let with_messages = !backlog.is_empty();
        if with_messages {
            let (client, messages) = (session.client_id.as_str(), backlog.len());
            tracing::debug!(
                client,
                messages,
                "cluster: a session's backlog is mirrored with it"
            );
        }
        match with_messages {
            true => self
                .owning
                .backlogs
                .insert(session.client_id.clone(), backlog),
            false => self.owning.backlogs.remove(&session.client_id),
        };
        let snapshot = connected_snapshot(session, ctx, with_messages);
        self.mirror_connected_snapshot(links, &session.client_id, snapshot, true);
    }

    /// A QoS 1/2 delivery to `session` was acknowledged (PUBACK, PUBREC: the delivery journal
    /// has a QoS 2 one from then; `key`: its message's, 0 for a PUBCOMP). Once no message of
    /// its backlog is left unacknowledged (or left at all: some expire, or are dropped), its
    /// mirror goes back to the snapshot without messages.
    pub(super) fn mirror_acknowledged(
        &mut self,
        links: &Links,
        ctx: &Ctx,
        session: &Session,
        key: u64,
    ) {
        if self.owning.backlogs.is_empty() {
            return;
        }
        let Some(backlog) = self.owning.backlogs.get_mut(&session.client_id) else {
            return;
        };
        backlog.remove(&key);
        let done = backlog.is_empty() || (session.queue.is_empty() && !holds_any(session, backlog));
        if done {
            let client = session.client_id.as_str();
            tracing::debug!(
                client,
                "cluster: a session's backlog is acknowledged; its mirror drops it"
            );
            self.owning.backlogs.remove(&session.client_id);
            let snapshot = connected_snapshot(session, ctx, false);
            self.mirror_connected_snapshot(links, &session.client_id, snapshot, false);
        }
    }

    /// A connected session's subscriptions changed (SUBSCRIBE, UNSUBSCRIBE): mirrored again.
    pub(super) fn mirror_subscriptions(
        &mut self,
        links: &Links,
        sessions: &Sessions,
        ctx: &Ctx,
        client_id: &MqttStr,
    ) {
        if links.cluster.is_none() {
            return;
        }
        if let Some(session) = sessions.get(client_id) {
            let with_messages = self.owning.backlogs.contains_key(client_id);
            let snapshot = connected_snapshot(session, ctx, with_messages);
            self.mirror_connected_snapshot(links, client_id, snapshot, false);
        }
    }

    pub(super) fn mirror_connected_snapshot(
        &mut self,
        links: &Links,
        client_id: &MqttStr,
        snapshot: Option<bytes::Bytes>,
        at_connect: bool,
    ) {
        let Some(link) = &links.cluster else {
            return;
        };
        let Some(snapshot) = snapshot else {
            self.mirror_forget(links, client_id);
            return;
        };
        let was_offline = self
            .owning
            .mirrored
            .insert(client_id.clone(), false)
            .is_some();
        link.mirror(MirrorOp::Connected {
            client_id: client_id.clone(),
            snapshot,
            purge_queue: at_connect && was_offline,
        });
    }

    /// A QoS 1/2 copy queued for a mirrored session while its client is away is mirrored too
    /// (`deliver.rs` asks only then).
    pub(super) fn mirror_queued(
        &self,
        links: &Links,
        ctx: &Ctx,
        client_id: &MqttStr,
        outgoing: &Outgoing,
    ) {
        let Some(link) = &links.cluster else {
            return;
        };
        if !self.owning.mirrored.contains_key(client_id) {
            return;
        }
        let message = encode_queued_message(&stored_message(outgoing, ctx.now()));
        link.mirror(MirrorOp::Queued {
            client_id: client_id.clone(),
            message: bytes::Bytes::from(message),
        });
    }

    /// A stored session recovered at start-up may still be mirrored from before the restart
    /// (`mirror_offline` when its client left): its return here replaces that.
    pub(super) fn mirror_recovered(&mut self, links: &Links, client_id: &MqttStr) {
        if links.cluster.is_some() {
            self.owning.mirrored.insert(client_id.clone(), false);
        }
    }

    /// A session another node released (or that came back from a dead node's mirror) is
    /// mirrored as that node left it until this shard's first write of it, which then removes
    /// the copies mirrored there. Not removed when the claim took the owner record, as before:
    /// a claiming node killed before its first write left nothing mirrored of the session, or
    /// (the releasing node's late writes landing after the removal) a queue with a hole the
    /// recovery did not read back (the 300-fault run of seed 5050 on 02e63ac, 1,172.9 s: 323
    /// acknowledged messages lost).
    pub(super) fn mirror_imported(&mut self, links: &Links, client_id: &MqttStr) {
        if links.cluster.is_some() {
            self.owning.mirrored.insert(client_id.clone(), true);
        }
    }

    /// The session ended: nothing of it stays mirrored.
    pub(super) fn mirror_forget(&mut self, links: &Links, client_id: &MqttStr) {
        let Some(link) = &links.cluster else {
            return;
        };
        self.owning.backlogs.remove(client_id);
        if self.owning.mirrored.remove(client_id).is_some() {
            link.mirror(MirrorOp::Forget {
                client_id: client_id.clone(),
            });
        }
    }

    /// Mirrors a copy queued for an offline session to the cluster.
    pub(super) fn mirror_if_offline(
        &self,
        links: &Links,
        sessions: &Sessions,
        ctx: &Ctx,
        at: SessionAt,
        outgoing: &Outgoing,
    ) {
        if let Some(session) = sessions.at(at)
            && session.conn.is_none()
        {
            self.mirror_queued(links, ctx, &session.client_id, outgoing);
        }
    }
}
