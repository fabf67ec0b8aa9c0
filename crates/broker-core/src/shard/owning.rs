//! [`Owning`]: CONNECTs waiting for the cluster to say whether this node may own their client id; `ownership.rs` asks and answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use broker_api::cluster::ReleaseRequest;

use super::{FastMap, FastSet};
use crate::session::Session;
use codec::{Connect, MqttStr};
use ring_runtime::ConnId;

/// CONNECTs on this shard waiting for the cluster's answer.
#[derive(Default)]
pub(super) struct Owning {
    pub(super) pending: FastMap<ConnId, PendingOwnership>,
    pub(super) next_token: u64,
    /// Sessions of this shard whose state is mirrored in JetStream (`mirror.rs`; at most one
    /// entry per session held), each with whether what is mirrored of it is still another
    /// node's (it came from there): the copies that node mirrored go with this shard's first
    /// write of it.
    pub(super) mirrored: FastMap<MqttStr, bool>,
    /// Mirrored sessions whose client came back to a backlog (QoS 1/2 messages queued or in
    /// flight at its CONNECT), each with the keys of those messages not acknowledged yet: while
    /// it has one, its mirror holds its messages too (`mirror.rs`).
    pub(super) backlogs: FastMap<MqttStr, FastSet<u64>>,
    /// Sessions released to another node that wait for their on-disk queue, by read number
    /// (`release.rs`).
    pub(super) releasing: FastMap<u64, PendingRelease>,
}

pub(super) struct PendingOwnership {
    pub(super) token: u64,
    pub(super) connect: Connect,
    /// Shared with the claim (`ClaimRequest::abandoned`): set when the connection closes.
    pub(super) abandoned: Arc<AtomicBool>,
}

impl Owning {
    /// `conn` closed: a claim its CONNECT waits for takes nothing more (its answer, when it
    /// comes, still keeps what it took: `ownership_answered`).
    pub(super) fn connection_closed(&self, conn: ConnId) {
        if let Some(pending) = self.pending.get(&conn) {
            pending.abandoned.store(true, Ordering::Release);
        }
    }
}

/// A session released to another node, waiting for its on-disk queue.
pub(super) struct PendingRelease {
    pub(super) request: ReleaseRequest,
    pub(super) session: Box<Session>,
}
