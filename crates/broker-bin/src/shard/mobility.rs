//! Sessions on the move between shards: copies forwarded after a session left
//! (`fence.rs`), copies held until the previous holder's fences arrive, fences owed, and the
//! claims of CONNECTs waiting for a session (`claims.rs`, `takeover.rs`).

use ring_runtime::ShardId;
use router::SubscriberId;

use super::{FastMap, claims, fence};
use crate::directory::ClaimId;

/// What this shard tracks of sessions in motion.
#[derive(Default)]
pub(super) struct Mobility {
    /// Sessions that left this shard, while their copies are still forwarded.
    pub(super) moved: FastMap<SubscriberId, fence::Moved>,
    /// Sessions that arrived, while copies are held for the fences still due.
    pub(super) holding: FastMap<SubscriberId, fence::Holding>,
    /// Fences this shard owes previous holders (sent at the end of the batch).
    pub(super) fences_due: Vec<(ShardId, SubscriberId)>,
    /// CONNECTs on this shard waiting for their session.
    pub(super) claims: FastMap<ClaimId, claims::PendingClaim>,
}
