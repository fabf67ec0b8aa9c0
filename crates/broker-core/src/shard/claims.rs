//! Claims: a CONNECT for a session that another shard holds (or is about to hold) claims it in
//! the shared directory and asks the previous claim's shard for it. In a burst of reconnects the
//! claims form a chain, possibly through one shard several times; each request names the claim
//! it supersedes, and the session walks the chain to the newest claim. A superseded claim's
//! connection is closed when its successor's request arrives.

use super::mobility::{Claimant, PendingClaim};
use codec::{Connect, MqttStr};
use ring_runtime::{ConnId, ShardId};

use super::{BrokerShard, Ctx};
use crate::directory::ClaimId;
use crate::message::{ShardMsg, TakeoverRequest};

impl BrokerShard {
    /// Parks `conn` and asks `holder` for the session that `supersedes` (a claim there) has.
    pub(super) fn request_takeover(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        connect: Connect,
        holder: ShardId,
        (supersedes, mine): (ClaimId, ClaimId),
    ) {
        let request = TakeoverRequest {
            client_id: connect.client_id.clone(),
            to_shard: self.id,
            to_claim: mine,
            supersedes,
            clean_start: connect.clean_start,
        };
        self.conns.mark_awaiting(conn);
        let claim = PendingClaim {
            client_id: connect.client_id.clone(),
            waiting: Some((conn, Box::new(connect))),
            successor: None,
        };
        self.delivery.mobility.claims.insert(mine, claim);
        self.figures.post(ctx, holder, ShardMsg::Takeover(request));
    }

    /// A newer connection on this shard for `claim`, pending here: it replaces the connection
    /// waiting (the newer wins).
    pub(super) fn replace_waiting(
        &mut self,
        ctx: &mut Ctx,
        claim: ClaimId,
        conn: ConnId,
        connect: Connect,
    ) {
        let Some(pending) = self.delivery.mobility.claims.get_mut(&claim) else {
            return;
        };
        let older = pending.waiting.replace((conn, Box::new(connect)));
        self.conns.mark_awaiting(conn);
        if let Some((older, _)) = older {
            self.wire().close_connection(ctx, older);
        }
    }

    /// A request for the session of `request.supersedes`, if that claim is pending here: the
    /// session will pass on when it arrives, and the superseded connection closes now.
    pub(super) fn supersede_pending(
        &mut self,
        ctx: &mut Ctx,
        request: TakeoverRequest,
    ) -> Option<TakeoverRequest> {
        let Some(pending) = self.delivery.mobility.claims.get_mut(&request.supersedes) else {
            return Some(request);
        };
        let superseded = pending.waiting.take();
        if pending.successor.replace(request).is_some() {
            tracing::error!("a claim superseded twice: the earlier request is dropped");
        }
        if let Some((conn, _)) = superseded {
            self.wire().close_connection(ctx, conn);
        }
        None
    }

    /// The claim `claim` is settled (its session, or the news that there is none, arrived):
    /// who gets the session.
    pub(super) fn settle_claim(&mut self, claim: ClaimId) -> Option<(MqttStr, Claimant)> {
        let pending = self.delivery.mobility.claims.remove(&claim)?;
        let claimant = match (pending.successor, pending.waiting) {
            (Some(request), _) => Claimant::Successor(request),
            (None, Some((conn, connect))) if self.conns.stop_waiting(conn) => {
                Claimant::Connection(conn, connect)
            }
            (None, _) => Claimant::Nobody,
        };
        Some((pending.client_id, claimant))
    }
}
