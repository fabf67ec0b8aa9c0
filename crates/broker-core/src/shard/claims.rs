//! Claims: a CONNECT for a session that another shard holds (or is about to hold) claims it in
//! the shared directory and asks the previous claim's shard for it. In a burst of reconnects the
//! claims form a chain, possibly through one shard several times; each request names the claim
//! it supersedes, and the session walks the chain to the newest claim. A superseded claim's
//! connection is closed when its successor's request arrives. [`claim`] takes the directory
//! entry; [`Claim`] says where the session comes from.

use super::mobility::{Claimant, Mobility, PendingClaim};
use crate::conn::Connections;
use codec::{Connect, MqttStr, ReasonCode};
use dashmap::mapref::entry::Entry;
use ring_runtime::{ConnId, ShardId};
use tracing::debug;

use super::Ctx;
use super::parts::Figures;
use crate::directory::{ClaimId, SessionLocation, SessionOwner};
use crate::message::{ShardMsg, TakeoverRequest};
use crate::shared::Shared;

impl Mobility {
    /// Parks `conn` (claim `mine`, on shard `to_shard`) and asks `holder` for the session that
    /// `supersedes` (a claim there) has.
    pub(super) fn request_takeover(
        &mut self,
        (conns, figures): (&mut Connections, &Figures),
        ctx: &mut Ctx,
        (conn, connect): (ConnId, Connect),
        to_shard: ShardId,
        (holder, supersedes, mine): (ShardId, ClaimId, ClaimId),
    ) {
        let request = TakeoverRequest {
            client_id: connect.client_id.clone(),
            to_shard,
            to_claim: mine,
            supersedes,
            clean_start: connect.clean_start,
        };
        conns.mark_awaiting(conn);
        let claim = PendingClaim {
            client_id: connect.client_id.clone(),
            waiting: Some((conn, Box::new(connect))),
            successor: None,
        };
        self.claims.insert(mine, claim);
        figures.post(ctx, holder, ShardMsg::Takeover(request));
    }

    /// A newer connection on this shard for `claim`, pending here: it replaces the connection
    /// waiting (the newer wins), which is returned to be closed.
    pub(super) fn replace_waiting(
        &mut self,
        conns: &mut Connections,
        claim: ClaimId,
        conn: ConnId,
        connect: Connect,
    ) -> Option<ConnId> {
        let pending = self.claims.get_mut(&claim)?;
        let older = pending.waiting.replace((conn, Box::new(connect)));
        conns.mark_awaiting(conn);
        older.map(|(older, _)| older)
    }

    /// A request for the session of `request.supersedes`, if that claim is pending here: the
    /// session will pass on when it arrives, and the superseded connection (returned) is to
    /// close now. The request comes back when that claim is not pending here.
    pub(super) fn supersede_pending(
        &mut self,
        request: TakeoverRequest,
    ) -> Result<Option<ConnId>, TakeoverRequest> {
        let Some(pending) = self.claims.get_mut(&request.supersedes) else {
            return Err(request);
        };
        let superseded = pending.waiting.take();
        if pending.successor.replace(request).is_some() {
            tracing::error!("a claim superseded twice: the earlier request is dropped");
        }
        Ok(superseded.map(|(conn, _)| conn))
    }

    /// The claim `claim` is settled (its session, or the news that there is none, arrived):
    /// who gets the session.
    pub(super) fn settle_claim(
        &mut self,
        conns: &mut Connections,
        claim: ClaimId,
    ) -> Option<(MqttStr, Claimant)> {
        let pending = self.claims.remove(&claim)?;
        let claimant = match (pending.successor, pending.waiting) {
            (Some(request), _) => Claimant::Successor(request),
            (None, Some((conn, connect))) if conns.stop_waiting(conn) => {
                Claimant::Connection(conn, connect)
            }
            (None, _) => Claimant::Nobody,
        };
        Some((pending.client_id, claimant))
    }
}

/// Where the session for a CONNECT comes from.
pub(super) enum Claim {
    /// No session existed: a fresh one with this key.
    Fresh(router::SubscriberId),
    /// The session (if any) is on this shard, or is claimed by a connection here.
    Local(ClaimId),
    /// Another shard holds it (for the claim `supersedes`) and must hand it over to `mine`.
    Remote {
        holder: ring_runtime::ShardId,
        supersedes: ClaimId,
        mine: ClaimId,
    },
}

/// Claims the client's entry in the shared session directory for this shard, for a client of
/// identity `owner`: refused (Client Identifier not valid) when the session belongs to
/// another identity and `auth.client_id_owner_check` is on.
pub(super) fn claim(
    shared: &Shared,
    shard: ShardId,
    client_id: &MqttStr,
    owner: &SessionOwner,
) -> Result<Claim, ReasonCode> {
    let check_owner = shared.config.auth.client_id_owner_check;
    let max = shared.config.sessions.max_sessions as usize;
    // Measured before taking the entry lock: `len` locks every map shard.
    let full = shared.directory.sessions.len() >= max;
    Ok(
        match shared
            .directory
            .sessions
            .entry(Box::from(client_id.as_str()))
        {
            Entry::Vacant(_) if full => return Err(ReasonCode::QuotaExceeded),
            Entry::Vacant(vacant) => {
                let subscriber = shared.directory.new_subscriber(shard);
                let claim = shared.directory.new_claim();
                vacant.insert(SessionLocation::new((shard, subscriber), claim, owner));
                Claim::Fresh(subscriber)
            }
            Entry::Occupied(occupied) if check_owner && !occupied.get().owner().admits(owner) => {
                debug!(
                    client = client_id.as_str(),
                    "CONNECT refused: the client id's session belongs to another identity"
                );
                return Err(ReasonCode::ClientIdentifierNotValid);
            }
            Entry::Occupied(mut occupied) if occupied.get().shard == shard => {
                let location = occupied.get_mut();
                location.set_owner(owner);
                Claim::Local(location.claim)
            }
            Entry::Occupied(mut occupied) => {
                let location = occupied.get_mut();
                location.set_owner(owner);
                let (holder, supersedes) = (location.shard, location.claim);
                let mine = shared.directory.new_claim();
                location.shard = shard;
                location.claim = mine;
                Claim::Remote {
                    holder,
                    supersedes,
                    mine,
                }
            }
        },
    )
}
