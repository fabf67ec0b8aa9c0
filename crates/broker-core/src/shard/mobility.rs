//! Sessions on the move between shards: copies forwarded after a session left
//! (`fence.rs`), copies held until the previous holder's fences arrive, fences owed, and the
//! claims of CONNECTs waiting for a session (`claims.rs`, `takeover.rs`).

use std::collections::VecDeque;
use std::time::Duration;

use codec::{Connect, MqttStr};
use ring_runtime::{ConnId, ShardId};
use router::SubscriberId;

use super::FastMap;
use super::timer_book::ArmedTimer;
use crate::directory::ClaimId;
use crate::message::{Recipient, TakeoverRequest};

/// Longest a takeover waits for the fences of the session's previous move. Fences arrive within
/// a few loop turns; only one lost to a mailbox over its bound (logged) waits this long, and
/// then order across that move is given up rather than the session. Half the CONNECT timeout at
/// most, so the waiting connection is still there.
const MAX_FENCE_WAIT: Duration = Duration::from_secs(1);

/// What this shard tracks of sessions in motion.
#[derive(Default)]
pub(super) struct Mobility {
    /// Sessions that left this shard, while their copies are still forwarded.
    pub(super) moved: FastMap<SubscriberId, Moved>,
    /// Sessions that arrived, while copies are held for the fences still due.
    pub(super) holding: FastMap<SubscriberId, Holding>,
    /// Fences this shard owes previous holders (sent at the end of the batch).
    pub(super) fences_due: Vec<(ShardId, SubscriberId)>,
    /// CONNECTs on this shard waiting for their session.
    pub(super) claims: FastMap<ClaimId, PendingClaim>,
    /// How long a takeover waits for the fences of the session's previous move: at most
    /// [`MAX_FENCE_WAIT`], half the CONNECT timeout.
    pub(super) fence_wait: Duration,
}

impl Mobility {
    /// Sessions in motion between the shards of a broker whose CONNECT timeout is
    /// `connect_timeout`.
    pub(super) fn new(connect_timeout: Duration) -> Self {
        Self {
            fence_wait: MAX_FENCE_WAIT.min(connect_timeout / 2),
            ..Self::default()
        }
    }
}

/// Copies held for a session that arrived on this shard, until every shard's fence is in.
#[derive(Debug)]
pub(super) struct Holding {
    /// Shards whose fence has not arrived yet.
    pub(super) waiting: Vec<ShardId>,
    /// Copies that came straight from a shard still in `waiting`, in arrival order.
    pub(super) held: VecDeque<(ShardId, Recipient)>,
    /// A takeover that waits until every fence is in, and the timer that bounds the wait.
    pub(super) deferred: Option<(TakeoverRequest, ArmedTimer)>,
}

/// A forwarding entry on the shard a session left.
#[derive(Debug)]
pub(super) struct Moved {
    /// Where the session went.
    pub to: ShardId,
    /// Fences still to pass on before nothing more can arrive here for the session.
    pub fences_left: usize,
}

/// A claim on this shard whose session has not arrived yet.
#[derive(Debug)]
pub(super) struct PendingClaim {
    pub client_id: MqttStr,
    /// The waiting connection and its CONNECT; `None` once superseded.
    pub waiting: Option<(ConnId, Box<Connect>)>,
    /// The newer claim that asked for the session: it passes on when it arrives.
    pub successor: Option<TakeoverRequest>,
}

/// Where a claimed session goes once it arrives.
pub(super) enum Claimant {
    /// A newer claim asked for it.
    Successor(TakeoverRequest),
    /// The waiting connection, still open.
    Connection(ConnId, Box<Connect>),
    /// Nobody: the connection closed.
    Nobody,
}

impl Mobility {
    /// Whether `claim` waits here for its session.
    pub(super) fn is_pending(&self, claim: ClaimId) -> bool {
        self.claims.contains_key(&claim)
    }

    /// Applying `Change::Owner` moved `subscriber` away from `previous`: fence it there.
    pub(super) fn fence_later(&mut self, previous: ShardId, subscriber: SubscriberId) {
        self.fences_due.push((previous, subscriber));
    }
}
