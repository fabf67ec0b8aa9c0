//! Session takeover: a client connects again, on this shard or another. The shared directory
//! names the shard that holds (or will hold) each session; a session moves as a whole through
//! the mailboxes, and the shard it left forwards deliveries that were already on their way.
//! Claims (claims.rs) say who gets it; fences (fence.rs) keep each publisher's order.

use codec::{MqttStr, ReasonCode};
use tracing::{debug, error};

use super::connect::fresh_session;
use super::mobility::Claimant;
use super::mobility::{Mobility, Moved};
use super::parts::Figures;
use super::{BrokerShard, Ctx};
use crate::directory::ClaimId;
use crate::message::{Change, SessionTransfer, ShardMsg, TakeoverRequest};
use crate::session::Session;
use crate::shared_parts::SessionDirectory;
use ring_runtime::ShardId;

impl BrokerShard {
    /// A newer claim asks for the session: give it away (or discard it on Clean Start). A claim
    /// still pending here passes the session on when it arrives; while copies are held for the
    /// session (it arrived moments ago) the old connection closes now and the session follows
    /// once every fence is in (fence.rs).
    pub(super) fn hand_over(&mut self, ctx: &mut Ctx, request: TakeoverRequest) {
        let mut request = match self.delivery.mobility.supersede_pending(request) {
            Err(request) => request,
            Ok(superseded) => {
                if let Some(conn) = superseded {
                    self.wire().close_connection(ctx, conn);
                }
                return;
            }
        };
        // A discarded session needs no order kept: Clean Start goes ahead at once.
        if !request.clean_start {
            let Some(undeferred) = self.defer_if_holding(ctx, request) else {
                return;
            };
            request = undeferred;
        }
        let session = match self.sessions.remove(&request.client_id) {
            Some(mut session) => {
                self.detach_connection(ctx, &mut session, true);
                self.release(ctx, session, &request)
            }
            None => None,
        };
        // What the mirror holds of it moves on with it: the shard it goes to replaces that at
        // its CONNECT (the copies mirrored while it was offline go then). Left here, they
        // stayed, and a later recovery of the session after the node's death queued them again
        // (a test of a backlog acknowledged before the death got it all again).
        let owning = &mut self.cluster_side.owning;
        owning.backlogs.remove(&request.client_id);
        let mirrored = match session {
            Some(_) => owning.mirrored.remove(&request.client_id),
            None => None,
        };
        send_transfer(&self.figures, ctx, request, (session, mirrored));
    }

    /// Closes the session's connection and keeps the request until the session's fences are
    /// in; gives the request back when nothing is held for the session.
    fn defer_if_holding(
        &mut self,
        ctx: &mut Ctx,
        request: TakeoverRequest,
    ) -> Option<TakeoverRequest> {
        let Some(subscriber) = self.sessions.get(&request.client_id).map(|s| s.subscriber) else {
            return Some(request);
        };
        let client_id = request.client_id.clone();
        if let Err(request) =
            self.delivery
                .mobility
                .defer_until_fenced(&mut self.timers, ctx, subscriber, request)
        {
            return Some(request);
        }
        if let Some(mut session) = self.sessions.remove(&client_id) {
            self.detach_connection(ctx, &mut session, true);
            // Leaving already: no expiry or delayed will while the fences come in (`release`).
            self.timers.disarm_session_timers(ctx, &mut session);
            session.will = None;
            self.sessions.insert(session);
        }
        None
    }

    /// Prepares a session that leaves this shard: timers off, a delayed will discarded (a new
    /// connection arrived before the delay ran out). On Clean Start it ends here.
    fn release(
        &mut self,
        ctx: &mut Ctx,
        mut session: Box<Session>,
        request: &TakeoverRequest,
    ) -> Option<Box<Session>> {
        self.timers.disarm_session_timers(ctx, &mut session);
        session.will = None;
        if request.clean_start {
            self.end_session_state(ctx, *session);
            return None;
        }
        let fences_left = self.delivery.routes.route_buf.len();
        let moved = Moved {
            to: request.to_shard,
            fences_left,
        };
        self.delivery
            .mobility
            .moved
            .insert(session.subscriber, moved);
        Some(session)
    }

    /// A claimed session arrived from another shard (or the news that there is none).
    pub(super) fn take_over(&mut self, ctx: &mut Ctx, transfer: SessionTransfer) {
        if let Some(session) = &transfer.session {
            self.note_mirrored(&session.client_id, transfer.mirrored);
        }
        let Some((client_id, claimant)) = self
            .delivery
            .mobility
            .settle_claim(&mut self.conns, transfer.to_claim)
        else {
            // Every transfer answers a claim pending here; keep a session rather than lose it.
            error!(
                client = transfer.client_id.as_str(),
                "session transfer for no claim"
            );
            if let Some(session) = transfer.session {
                self.receive_session(ctx, session, Claimant::Nobody);
            }
            return;
        };
        match transfer.session {
            Some(session) => self.receive_session(ctx, session, claimant),
            None => self.claim_found_nothing(ctx, &client_id, transfer.to_claim, claimant),
        }
    }

    /// The session is here from now on: announce it, hold copies sent straight here until
    /// every shard has fenced, and give it to the claimant.
    fn receive_session(&mut self, ctx: &mut Ctx, mut session: Box<Session>, claimant: Claimant) {
        // A read of its on-disk queue asked for by the old shard answers there: ask again here.
        if let Some(spilled) = session.spilled_mut() {
            spilled.reading = None;
        }
        let subscriber = session.subscriber;
        self.figures.broadcast(
            ctx,
            &self.shared.order,
            Change::Owner {
                subscriber,
                shard: self.id,
            },
        );
        self.delivery.mobility.hold_until_fenced(ctx, subscriber);
        match claimant {
            Claimant::Successor(request) => {
                // A newer claim is waiting: the session passes on once fenced, like any other.
                self.sessions.insert(session);
                if let Err(request) = self.delivery.mobility.defer_until_fenced(
                    &mut self.timers,
                    ctx,
                    subscriber,
                    request,
                ) {
                    self.hand_over(ctx, request);
                }
            }
            Claimant::Connection(conn, connect) if connect.clean_start => {
                // The claim asked to keep the session, a newer CONNECT that replaced it here
                // (claims.rs) did not.
                let client_id = session.client_id.clone();
                self.end_session_state(ctx, *session);
                let owner = super::connect::owner_of(&connect);
                let fresh = fresh_session(&self.shared, self.id, &client_id, owner);
                self.complete_connect(ctx, conn, *connect, fresh, false, false);
            }
            Claimant::Connection(conn, connect) => {
                self.complete_connect(ctx, conn, *connect, session, true, false);
            }
            Claimant::Nobody => {
                let protocol = session.protocol;
                self.keep_detached(ctx, session, protocol);
            }
        }
    }

    /// A session that came from another shard is mirrored as it was there (`mirrored`).
    fn note_mirrored(&mut self, client_id: &MqttStr, mirrored: Option<bool>) {
        if let Some(imported) = mirrored {
            let owning = &mut self.cluster_side.owning;
            owning.mirrored.insert(client_id.clone(), imported);
        }
    }

    /// The claimed session had ended (or was discarded): a waiting connection starts afresh.
    fn claim_found_nothing(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        claim: ClaimId,
        claimant: Claimant,
    ) {
        match claimant {
            Claimant::Successor(request) => {
                send_transfer(&self.figures, ctx, request, (None, None));
            }
            Claimant::Connection(conn, connect) => {
                let owner = super::connect::owner_of(&connect);
                let fresh = fresh_session(&self.shared, self.id, client_id, owner);
                self.complete_connect(ctx, conn, *connect, fresh, false, false);
            }
            Claimant::Nobody => {
                self.shared
                    .directory
                    .sessions
                    .remove_if(client_id.as_str(), |_, location| location.claim == claim);
            }
        }
    }

    /// Detaches a session from its connection, if it has one: a taken-over connection gets
    /// DISCONNECT 0x8E, and its will is published now unless it has a delay (a new connection
    /// arrived before the delay elapsed, so a delayed will is never sent).
    pub(super) fn detach_connection(
        &mut self,
        ctx: &mut Ctx,
        session: &mut Session,
        taken_over: bool,
    ) {
        let Some(old) = session.conn.take() else {
            return;
        };
        let will = session.will.take();
        if let Some(connection) = self.conns.get_mut(&old) {
            connection.detach();
            let publish_will = connection.publish_will;
            debug!(conn = ?old, client = session.client_id.as_str(), "session taken over");
            if taken_over {
                self.wire()
                    .send_disconnect(ctx, old, ReasonCode::SessionTakenOver);
            }
            self.wire().close_connection(ctx, old);
            if let Some(pending) = will.filter(|w| publish_will && w.delay.is_zero()) {
                self.publish_will(ctx, &session.client_id, pending.will);
            }
        }
    }
}

impl Mobility {
    /// Removes the directory entry for `client_id` if it still points at this shard (and at
    /// `subscriber`, when given).
    pub(super) fn forget_directory_entry(
        &mut self,
        directory: &SessionDirectory,
        shard: ShardId,
        client_id: &MqttStr,
        subscriber: Option<router::SubscriberId>,
    ) {
        let me = shard;
        let claims = &self.claims;
        // A newer claim pending here keeps the entry: its session (or a fresh one) comes here.
        directory
            .sessions
            .remove_if(client_id.as_str(), |_, location| {
                location.shard == me
                    && subscriber.is_none_or(|s| s == location.subscriber)
                    && !claims.contains_key(&location.claim)
            });
    }
}

/// Sends the session `request` claims (or the news that there is none) to its claimant.
fn send_transfer(
    figures: &Figures,
    ctx: &mut Ctx,
    request: TakeoverRequest,
    (session, mirrored): (Option<Box<Session>>, Option<bool>),
) {
    let transfer = SessionTransfer {
        client_id: request.client_id,
        to_claim: request.to_claim,
        session,
        mirrored,
    };
    figures.post(ctx, request.to_shard, ShardMsg::Transfer(transfer));
}
