//! [`Owning`]: CONNECTs waiting for the cluster to say whether this node may own their client id; `ownership.rs` asks and answers.

use broker_api::cluster::ReleaseRequest;

use super::FastMap;
use crate::session::Session;
use codec::{Connect, MqttStr};
use ring_runtime::ConnId;

/// CONNECTs on this shard waiting for the cluster's answer.
#[derive(Default)]
pub(super) struct Owning {
    pub(super) pending: FastMap<ConnId, PendingOwnership>,
    pub(super) next_token: u64,
    /// Sessions of this shard whose state is mirrored in JetStream (`mirror.rs`; at most one
    /// entry per session held).
    pub(super) mirrored: FastMap<MqttStr, ()>,
    /// Sessions released to another node that wait for their on-disk queue, by read number
    /// (`release.rs`).
    pub(super) releasing: FastMap<u64, PendingRelease>,
}

pub(super) struct PendingOwnership {
    pub(super) token: u64,
    pub(super) connect: Connect,
}

/// A session released to another node, waiting for its on-disk queue.
pub(super) struct PendingRelease {
    pub(super) request: ReleaseRequest,
    pub(super) session: Box<Session>,
}
