//! Start-up after a restart: the shard installs its share of the recovered sessions and every
//! recovered subscription and retained message in its replica (`crate::store::Recovery`); once
//! it runs, it arms the recovered sessions' expiry and will timers, counting the downtime.

use std::time::{Duration, SystemTime};

use codec::MqttStr;
use std::sync::Arc;

use session_store::storage::StoredSession;
use session_store::{InflightState, PendingWill, SessionExpiry};

use super::gauges::Gauges;
use super::parts::Replication;
use super::timer_book::TimerBook;
use super::timer_book::TimerPurpose;
use super::{BrokerShard, Ctx};
use crate::session::Sessions;
use crate::session::{Session, SessionSubscription};
use crate::shared::Shared;
use crate::shared_parts::Links;
use crate::store::{ReplicaSeed, outgoing_from_stored};
use ring_runtime::ShardId;

impl BrokerShard {
    /// At construction: the recovered replica state and this shard's recovered sessions.
    pub(super) fn install_recovered(&mut self) {
        let Some(seed) = self.shared.persistence.recovery.seed() else {
            return;
        };
        self.replication
            .install_seed(&self.shared.links, self.id, &seed);
        let now = self.shared.time.clock.now();
        for recovered in self.shared.persistence.recovery.take_sessions(self.id) {
            let client_id = recovered.stored.client_id.clone();
            let mut session = rebuild_session(
                &self.shared,
                &mut self.figures.gauges,
                &mut self.timers,
                recovered.stored,
                recovered.subscriber,
                now,
            );
            spill_recovered_tail(&mut session, recovered.queued_total);
            self.sessions.insert(session);
            self.cluster_side
                .mirror_recovered(&self.shared.links, &client_id);
            self.timers.recovered.push(client_id);
        }
        self.delivery.delayed.recovered = self.shared.persistence.recovery.take_delayed(self.id);
    }

    /// Once running: each recovered session still without a connection counts its expiry and
    /// will delay from when it disconnected (a session connected at the crash: from now, and
    /// its will is due, as for any connection that ended without DISCONNECT).
    pub(super) fn resume_recovered(&mut self, ctx: &mut Ctx) {
        self.resume_delayed(ctx);
        let down_since: Vec<(MqttStr, SystemTime)> =
            std::mem::take(&mut self.timers.recovered_down_since);
        for client_id in std::mem::take(&mut self.timers.recovered) {
            let Some(session) = self.sessions.get(&client_id) else {
                continue;
            };
            if session.conn.is_some() {
                continue;
            }
            match down_since.iter().find(|(c, _)| *c == client_id) {
                None => self.session_disconnected(ctx, &client_id, true),
                Some((_, at)) => {
                    let elapsed = SystemTime::now().duration_since(*at).unwrap_or_default();
                    self.timers
                        .arm_recovered_timers(&mut self.sessions, ctx, &client_id, elapsed);
                }
            }
        }
    }
}

/// A session as it was stored: subscriptions, queue, inflight window (unsent: resent on
/// resume) and inbound QoS 2 ids; its subscriptions counted in `gauges`, when it
/// disconnected kept in `timers` (its expiry and will delay count from then).
pub(super) fn rebuild_session(
    shared: &Shared,
    gauges: &mut Gauges,
    timers: &mut TimerBook,
    stored: StoredSession,
    subscriber: router::SubscriberId,
    now: std::time::Instant,
) -> Box<Session> {
    let max_inflight = shared.config.limits.max_inflight_outbound;
    let mut session = Session::new(stored.client_id, subscriber, max_inflight);
    session.protocol = stored.protocol;
    session.expiry = stored.expiry;
    session.will = stored.will.map(Box::new);
    let limits = &shared.limits.topics;
    for sub in stored.subscriptions {
        let Some(read) = shared.topic_rules.exclusive.read(&sub.filter, limits) else {
            continue;
        };
        // An exclusive one's hold was taken when the sessions were dealt (`deal.rs`).
        let filter = read.filter;
        let record = SessionSubscription {
            filter,
            options: sub.options,
            id: sub.id,
        };
        session.subscriptions.insert(sub.filter, record);
        gauges.subscriptions += 1;
    }
    for (seq, message) in stored.queued {
        if let Some(outgoing) = outgoing_from_stored(&message, seq, now) {
            session.queue.push(outgoing, &shared.limits.queues);
        }
    }
    for (packet_id, state) in stored.inflight {
        let state = match state {
            InflightState::AwaitingPubAck(m) => {
                outgoing_from_stored(&m, 0, now).map(InflightState::AwaitingPubAck)
            }
            InflightState::AwaitingPubRec(m) => {
                outgoing_from_stored(&m, 0, now).map(InflightState::AwaitingPubRec)
            }
            InflightState::AwaitingPubComp => Some(InflightState::AwaitingPubComp),
        };
        if let Some(state) = state {
            session.inflight.restore(packet_id, state);
        }
    }
    let receive_maximum = usize::from(shared.config.limits.receive_maximum);
    for id in stored.awaiting_release {
        session.record_awaiting_release(id, receive_maximum);
    }
    if let Some(at) = stored.disconnected_at {
        timers
            .recovered_down_since
            .push((session.client_id.clone(), at));
    }
    session
}

/// A recovered session whose queue is longer than the part loaded keeps the rest on disk.
fn spill_recovered_tail(session: &mut Session, queued_total: usize) {
    let in_memory = session.queue.len();
    let Some(after) = session.queue.iter().last().map(|o| o.seq) else {
        return;
    };
    if queued_total > in_memory {
        session.set_spilled(Some(session_store::SpilledQueue {
            on_disk: (queued_total - in_memory) as u64,
            after,
            reading: None,
            written_since_read: 0,
        }));
    }
}

impl Replication {
    fn install_seed(&mut self, links: &Links, shard: ShardId, seed: &ReplicaSeed) {
        for change in &seed.subscriptions {
            change.apply_to(&mut self.replica.table);
            if links.reports_interest(shard)
                && let router::SubscriptionChange::Subscribe { filter, .. } = change
            {
                links.report_interest(filter.as_str(), 1);
            }
        }
        for (subscriber, shard) in &seed.owners {
            self.replica.set_owner(*subscriber, *shard);
        }
        for (topic, message) in &seed.retained {
            let size = message.publish.payload().len() + topic.as_str().len();
            self.replica
                .retained
                .store(topic, Arc::clone(message), size);
        }
    }
}

impl TimerBook {
    /// Arms what a session disconnected `elapsed` ago still has to wait for.
    fn arm_recovered_timers(
        &mut self,
        sessions: &mut Sessions,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        elapsed: Duration,
    ) {
        let now = ctx.now();
        let Some(session) = sessions.get_mut(client_id) else {
            return;
        };
        let expiry = session.expiry;
        let will_delay = session.will.as_deref().map(|w: &PendingWill| w.delay);
        if let Some(delay) = will_delay {
            let at = now + delay.saturating_sub(elapsed);
            let timer = self.arm(ctx, at, TimerPurpose::WillDelay(client_id.clone()));
            if let Some(session) = sessions.get_mut(client_id) {
                session.set_will_timer(Some(timer));
            }
        }
        if let SessionExpiry::After(secs) = expiry {
            let left = Duration::from_secs(u64::from(secs)).saturating_sub(elapsed);
            let timer = self.arm(
                ctx,
                now + left,
                TimerPurpose::SessionExpiry(client_id.clone()),
            );
            if let Some(session) = sessions.get_mut(client_id) {
                session.set_expiry_timer(Some(timer));
            }
        }
    }
}
