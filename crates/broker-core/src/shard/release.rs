//! Releasing a session another node takes over (docs/cluster.md, "Sessions across nodes"):
//! its connection closes with 0x8E, and its state leaves as one snapshot, queue included. A
//! stored queue that outgrew `persistence.memory_queue_messages` keeps its newest copies on
//! disk only (`spill.rs`): that part is read back through the store thread first, and the
//! reply waits for it. The stored session stays in the store until the cluster thread finds
//! the owner record naming the claiming node (`ShardMsg::ClusterReleaseTaken`), or a session
//! of that client id starts here again: the node may die before its reply arrives.

use super::owning::PendingRelease;
use codec::MqttStr;
use session_store::storage::{SessionWrite, StoredMessage, encode_session_snapshot};
use tracing::warn;

use super::{BrokerShard, Ctx};
use crate::message::ShardMsg;
use crate::session::Session;
use crate::store::{QueueReadDone, stored_session_of};
use broker_api::cluster::ReleaseRequest;

/// Shards a release request is forwarded through at most, looking for the session.
const MAX_RELEASE_HOPS: u8 = 4;

impl BrokerShard {
    /// Another node takes a client over: releases its session if this shard holds it (else
    /// forwards the request to the shard the directory names), and replies with its state.
    pub(super) fn release_to_cluster(&mut self, ctx: &mut Ctx, mut request: ReleaseRequest) {
        let holder = self
            .shared
            .directory
            .sessions
            .get(request.client_id.as_str())
            .map(|location| location.shard);
        if let Some(holder) = holder.filter(|h| *h != self.id)
            && request.hops < MAX_RELEASE_HOPS
        {
            request.hops += 1;
            let message = ShardMsg::ClusterRelease(Box::new(request));
            self.figures.post(ctx, holder, message);
            return;
        }
        self.release_session(ctx, request);
    }

    /// Ends the session's life here (connection closed with 0x8E, timers off, a pending will
    /// discarded as in any takeover), then replies with its snapshot (none without a session
    /// or with Clean Start), once its on-disk queue is read when it has one.
    fn release_session(&mut self, ctx: &mut Ctx, request: ReleaseRequest) {
        let Some(mut session) = self.sessions.remove(&request.client_id) else {
            let _ = request.reply.send(None);
            return;
        };
        // What is mirrored of this client is the claiming node's to replace: it removes it
        // once its compare-and-set took the owner record. A removal queued here could land
        // after the new owner mirrored the session and delete that (its client then lost
        // everything at the new owner's death: the 300-fault run of seed 4848).
        self.cluster_side.owning.mirrored.remove(&request.client_id);
        self.cluster_side.owning.backlogs.remove(&request.client_id);
        self.detach_connection(ctx, &mut session, true);
        self.timers.disarm_session_timers(ctx, &mut session);
        session.will = None;
        let on_disk = session.spilled().filter(|spilled| spilled.on_disk > 0);
        match on_disk.map(|spilled| spilled.after) {
            Some(after) if !request.clean_start => {
                // The whole disk tail: the queue's bound holds it (memory and disk together).
                let limit = self.shared.limits.queues.max_len;
                let client_id = request.client_id.clone();
                let read = self.durable.request_read(self.id, client_id, after, limit);
                let pending = PendingRelease { request, session };
                self.cluster_side.owning.releasing.insert(read, pending);
            }
            _ => self.finish_release(ctx, request, session, Vec::new()),
        }
    }

    /// A finished read of the store: the on-disk queue of a session being released finishes
    /// its release (`None`); any other read is handed back.
    pub(super) fn release_read_done(
        &mut self,
        ctx: &mut Ctx,
        done: QueueReadDone,
    ) -> Option<QueueReadDone> {
        let Some(pending) = self.cluster_side.owning.releasing.remove(&done.id) else {
            return Some(done);
        };
        self.finish_release(ctx, pending.request, pending.session, done.messages);
        None
    }

    /// Replies with the snapshot (its queue followed by `disk`, the on-disk tail) and ends
    /// the session here.
    fn finish_release(
        &mut self,
        ctx: &mut Ctx,
        request: ReleaseRequest,
        mut session: Box<Session>,
        disk: Vec<(u64, StoredMessage)>,
    ) {
        let snapshot = (!request.clean_start).then(|| {
            let mut stored = stored_session_of(&session, ctx.now());
            stored.queued.extend(disk);
            encode_session_snapshot(&stored)
        });
        self.shared
            .directory
            .sessions
            .remove(request.client_id.as_str());
        // Its messages leave with it: not counted as dropped where it ends.
        let capacity = self.shared.config.limits.max_inflight_outbound;
        session.queue = session_store::MessageQueue::new();
        session.inflight = session_store::InflightWindow::new(capacity);
        session.set_spilled(None);
        if snapshot.is_some() && self.durable.stores(session.expiry) {
            // The stored copy stays until the claiming node holds the owner record: this node
            // may die before the reply reaches it, and its next start then resumes the
            // session (300-fault run of seed 5050 on 8d6653b, 869 s: the session was lost).
            self.shared
                .directory
                .mark_released_copy(request.client_id.as_str());
            self.drop_session_state(ctx, *session);
        } else {
            self.end_session_state(ctx, *session);
        }
        if request.reply.send(snapshot).is_err() {
            warn!(client = %request.client_id, "cluster: the node taking a session over stopped waiting for it; its state is lost");
        }
    }

    /// The node `client_id`'s session was released to holds its owner record now: the stored
    /// copy kept here goes, unless a session of that id is here again (whose start removed it,
    /// [`Self::forget_released_copy`]).
    pub(super) fn released_copy_taken(&mut self, client_id: &MqttStr) {
        let directory = &self.shared.directory;
        if !directory.sessions.contains_key(client_id.as_str()) {
            self.forget_released_copy(client_id);
        }
    }

    /// A session of `client_id` starts here (new, resumed from another node, or imported): a
    /// stored copy left by its release to another node goes first, so that none of its
    /// subscriptions or queued messages outlives it in the store.
    pub(super) fn forget_released_copy(&mut self, client_id: &MqttStr) {
        if self.shared.directory.take_released_copy(client_id.as_str()) {
            let client_id = client_id.clone();
            self.durable
                .record(SessionWrite::SessionRemoved { client_id });
        }
    }
}
