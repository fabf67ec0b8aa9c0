//! Backend grants asked again after a reload (SIGHUP, the admin API's reload).
//!
//! A reload empties the backends' caches and bumps the grants epoch
//! (`AccessControl::grants_epoch`). At its next turn end each shard asks the backend that let
//! each of its connected clients in about that client again, when the grant it gave could
//! change: its rules (Redis ACL sets, JWT claims), its answers per topic (HTTP's ACL URL), or
//! a superuser flag. A backend that hands grants over (Redis) gives the whole grant afresh:
//! it replaces the old one and every subscription is judged by it (with the ACL file). Else
//! each subscription filter is asked about as a SUBSCRIBE would be (`TopicAccess::Subscribe`).
//!
//! A subscription the rules in force now refuse is removed from the session and the router
//! as an UNSUBSCRIBE would remove it, without a packet (MQTT has no server-side unsubscribe;
//! mosquitto stops delivering too); logged at info and counted in `subscriptions_revoked`.
//! No opinion (JWT claims cannot change by a reload) keeps a subscription, and so does a
//! backend that fails to answer (logged at warn). Until the answers arrive the old admission
//! stands: a window of one backend round trip.
//!
//! The work is bounded: at most [`RECHECKS_IN_FLIGHT`] jobs per shard are out at once (one
//! job per client); a busy job queue (`auth.max_pending`) is retried after [`BUSY_RETRY`].

use std::time::Duration;

use access::backend::{AclRequest, Grant, TopicAccess};
use access::gatekeeper::chain::{FilterAnswer, Recheck};
use access::gatekeeper::grant::ClientGrant;
use access::gatekeeper::workers::Job;
use codec::MqttStr;
use ring_runtime::{ConnId, ShardId};
use tracing::{debug, info, warn};

use super::acl_client::TopicVerdict;
use super::grant_rechecks::{AskedRecheck, GrantRechecks};
use super::timer_book::{TimerBook, TimerPurpose};
use super::{BrokerShard, Ctx, client_id_of};
use crate::metrics::ShardCounters;
use crate::session::Sessions;
use crate::shared_parts::AccessControl;

/// Re-check jobs one shard has out at once, at most.
const RECHECKS_IN_FLIGHT: usize = 4;
/// How long after a busy job queue the re-checks are submitted again.
const BUSY_RETRY: Duration = Duration::from_millis(100);

/// What asking the backends again needs besides the re-checks: the backends (in `control`),
/// the timer book (a busy job queue is retried) and this shard's id (the answers come back to
/// it).
pub(super) struct RecheckAsking<'a> {
    pub(super) control: &'a AccessControl,
    pub(super) timers: &'a mut TimerBook,
    pub(super) shard: ShardId,
}

impl BrokerShard {
    /// At turn end: the grant re-checks (see [`GrantRechecks::recheck_grants`]).
    pub(super) fn recheck_grants(&mut self, ctx: &mut Ctx) {
        let asking = RecheckAsking {
            control: &self.shared.access,
            timers: &mut self.timers,
            shard: self.id,
        };
        let (conns, sessions) = (&self.conns, &self.sessions);
        let clients = |conn| {
            let client_id = client_id_of(conns, sessions, conn)?;
            sessions.get(&client_id)?;
            let filters = subscription_filters(sessions, &client_id);
            Some((client_id, filters))
        };
        self.auth.rechecks.recheck_grants(asking, ctx, clients);
    }

    /// A worker's answer to a re-check: applied when it is about the same client and the
    /// grants epoch now in force.
    pub(super) fn grant_rechecked(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        token: u64,
        outcome: Recheck,
    ) {
        let Some(asked) = self.auth.rechecks.asked.remove(&token) else {
            return;
        };
        let current = asked.conn == conn
            && asked.epoch == self.auth.rechecks.seen_epoch
            && client_id_of(&self.conns, &self.sessions, conn).as_ref() == Some(&asked.client_id);
        if !current {
            return;
        }
        let _span = self.conns.span(&self.sessions, self.id, conn).entered();
        match outcome {
            Recheck::Grant(grant) => self.regranted(ctx, conn, &asked.client_id, grant),
            Recheck::Filters(answers) => self.filters_rechecked(ctx, conn, &asked, &answers),
            Recheck::Failed(error) => warn!(
                client = asked.client_id.as_str(),
                %error,
                "grant re-check failed after a reload: the subscriptions admitted before it stay"
            ),
        }
    }

    /// The backend handed `conn`'s grant over afresh: it replaces the old one, and every
    /// subscription is judged by it and the ACL file.
    fn regranted(&mut self, ctx: &mut Ctx, conn: ConnId, client_id: &MqttStr, grant: Grant) {
        let Some(client) = self.auth.rechecks.clients.get(&conn) else {
            return;
        };
        let (link, username) = (client.link, client.username.clone());
        let grant = match ClientGrant::from_backend(
            grant,
            link,
            self.shared.access.link_checks_topics(link),
        ) {
            Ok(grant) => grant,
            Err(problem) => {
                warn!(client = client_id.as_str(), %problem,
                    "grant re-check: the backend's topic rules are invalid; the old grant stays");
                return;
            }
        };
        let filters = subscription_filters(&self.sessions, client_id);
        self.auth.acl_clients.remove(&conn);
        self.auth.acl_connected(
            &self.shared.access,
            conn,
            client_id,
            username,
            Some(grant),
            filters.iter(),
        );
        for filter in &filters {
            if self
                .auth
                .subscribe_verdict(&self.shared.access, conn, client_id, filter.as_str())
                .0
                != TopicVerdict::Allowed
            {
                self.revoke_subscription(ctx, client_id, filter);
            }
        }
    }

    /// The backend's answers per filter: a refused filter is removed unless the ACL file
    /// still lets the client read (some of) it.
    fn filters_rechecked(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        asked: &AskedRecheck,
        answers: &[FilterAnswer],
    ) {
        let client_id = &asked.client_id;
        let mut refused = Vec::new();
        for (filter, answer) in asked.filters.iter().zip(answers) {
            match answer {
                FilterAnswer::Allowed => {}
                FilterAnswer::Refused => refused.push(filter),
                FilterAnswer::Unknown => debug!(
                    filter = filter.as_str(),
                    "grant re-check: the backend has no opinion; the subscription stays"
                ),
            }
        }
        for filter in refused {
            let fresh = (filter.as_str().to_owned(), TopicAccess::Subscribe, false);
            self.auth.topic_waits.fresh = vec![fresh];
            let verdict =
                self.auth
                    .subscribe_verdict(&self.shared.access, conn, client_id, filter.as_str());
            self.auth.topic_waits.fresh.clear();
            match verdict {
                (TopicVerdict::Allowed, partly) => {
                    if partly && let Some(client) = self.auth.acl_clients.get_mut(&conn) {
                        client.read_filtered = true;
                    }
                }
                (TopicVerdict::Refused | TopicVerdict::Ask, _) => {
                    self.revoke_subscription(ctx, client_id, filter);
                }
            }
        }
    }

    /// Removes `client_id`'s subscription `filter` as an UNSUBSCRIBE would, without a packet.
    fn revoke_subscription(&mut self, ctx: &mut Ctx, client_id: &MqttStr, filter: &MqttStr) {
        if self
            .subscriptions()
            .remove_subscription(ctx, client_id, filter)
            .is_none()
        {
            return;
        }
        self.cluster_side
            .mirror_subscriptions(&self.shared.links, &self.sessions, ctx, client_id);
        ShardCounters::add(&self.figures.counters().subscriptions_revoked, 1);
        info!(
            client = client_id.as_str(),
            filter = filter.as_str(),
            "subscription revoked: the reloaded rules no longer let the client read it"
        );
    }
}

impl GrantRechecks {
    /// At turn end: a new grants epoch queues every tracked client; then as many re-checks
    /// are asked as the bound allows (`clients` says who `conn`'s client is and what it is
    /// subscribed to).
    pub(super) fn recheck_grants(
        &mut self,
        asking: RecheckAsking<'_>,
        ctx: &mut Ctx,
        clients: impl Fn(ConnId) -> Option<(MqttStr, Vec<MqttStr>)>,
    ) {
        let epoch = asking.control.grants_epoch();
        if epoch != self.seen_epoch {
            self.seen_epoch = epoch;
            self.queue = self.clients.keys().copied().collect();
        }
        if self.queue.is_empty() || self.retry_armed {
            return;
        }
        self.ask_rechecks(asking, ctx, clients);
    }

    /// Submits queued re-checks while fewer than [`RECHECKS_IN_FLIGHT`] are out.
    fn ask_rechecks(
        &mut self,
        asking: RecheckAsking<'_>,
        ctx: &mut Ctx,
        clients: impl Fn(ConnId) -> Option<(MqttStr, Vec<MqttStr>)>,
    ) {
        let Some(gatekeeper) = &asking.control.gatekeeper else {
            self.queue.clear();
            return;
        };
        while self.asked.len() < RECHECKS_IN_FLIGHT {
            let Some(conn) = self.queue.pop_front() else {
                return;
            };
            let Some((token, job, asked)) =
                self.recheck_job(asking.control, asking.shard, ctx, conn, &clients)
            else {
                continue;
            };
            if gatekeeper.submit(job).is_err() {
                debug!("grant re-check deferred: auth.max_pending questions wait already");
                self.queue.push_front(conn);
                self.arm_recheck_retry(asking.timers, ctx);
                return;
            }
            self.asked.insert(token, asked);
        }
    }

    fn arm_recheck_retry(&mut self, timers: &mut TimerBook, ctx: &mut Ctx) {
        if !self.retry_armed {
            self.retry_armed = true;
            let at = ctx.now() + BUSY_RETRY;
            timers.arm(ctx, at, TimerPurpose::RecheckRetry);
        }
    }

    /// The job asking about `conn`'s client, and what it asks; `None` when there is nothing
    /// to ask (gone, or no subscription and a backend that answers only per topic).
    fn recheck_job(
        &mut self,
        control: &AccessControl,
        shard: ShardId,
        ctx: &Ctx,
        conn: ConnId,
        clients: impl Fn(ConnId) -> Option<(MqttStr, Vec<MqttStr>)>,
    ) -> Option<(u64, Job, AskedRecheck)> {
        let client = self.clients.get(&conn)?;
        let link = client.link;
        let username = client.username.as_ref().map(|u| u.as_str().to_owned());
        let (client_id, filters) = clients(conn)?;
        if filters.is_empty() && control.link_checks_topics(link) {
            return None;
        }
        let peer = ctx
            .peer_addr(conn)
            .unwrap_or(access::gatekeeper::workers::NO_PEER);
        let request = |topic: &str| AclRequest {
            client_id: client_id.as_str().to_owned(),
            username: username.clone(),
            peer,
            topic: topic.to_owned(),
            access: TopicAccess::Subscribe,
        };
        let requests = filters.iter().map(|f| request(f.as_str())).collect();
        self.next_token += 1;
        let job = Job::Recheck {
            shard,
            conn,
            token: self.next_token,
            link,
            client_id: client_id.as_str().to_owned(),
            username,
            requests,
        };
        let asked = AskedRecheck {
            conn,
            client_id,
            epoch: self.seen_epoch,
            filters,
        };
        Some((self.next_token, job, asked))
    }
}

/// The filters `client_id`'s session here is subscribed to.
fn subscription_filters(sessions: &Sessions, client_id: &MqttStr) -> Vec<MqttStr> {
    sessions.get(client_id).map_or_else(Vec::new, |session| {
        session
            .subscriptions
            .iter()
            .map(|(filter, _)| filter.clone())
            .collect()
    })
}
