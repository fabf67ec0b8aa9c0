//! Wills pass the checks a client's own PUBLISH passes: the `$SYS` write block, the
//! embedding's `Authenticator::authorize_publish`, the ACL file, and the rules or topic
//! answers of the backend that let the client in (`acl.rs`, `topic_checks.rs`).
//!
//! - At CONNECT, once the credentials are accepted: a will the client may not publish refuses
//!   the CONNECT with CONNACK 0x87 Not authorized (3.1.1: return code 5). When only the
//!   backend can tell, the CONNECT waits (`Phase::AwaitingAuth`, its CONNECT timeout running)
//!   while a worker asks it, as a parked PUBLISH does.
//! - When the will fires (socket lost, keep-alive, takeover, delay or session expiry,
//!   shutdown): judged again by the rules in force then (the ACL file may have been reloaded
//!   since). A will refused then is dropped.
//!
//! Either way it is counted in `wills_not_authorized` and logged at warn.

use super::will_checks::{WaitingConnect, WillCheck, WillChecks, WillRules};
use codec::{Connect, MqttStr, ReasonCode};
use ring_runtime::{ConnId, ShardId};
use tracing::warn;

use super::acl_client::TopicVerdict;
use super::parts::Figures;
use super::{BrokerShard, Ctx};
use crate::conn::{Connections, Phase};
use crate::metrics::ShardCounters;
use crate::session::Sessions;
use crate::shared::Shared;
use crate::shared_parts::AccessControl;
use access::backend::{AclRequest, TopicAccess};
use access::gatekeeper::grant::ClientGrant;
use access::gatekeeper::keys::AclKey;
use access::gatekeeper::workers::Job;

/// Topics only the broker publishes (as for PUBLISH, `publish.rs`).
const SYS_PREFIX: &str = "$SYS";

/// What judging a will reads: the rules in force, the counter of refusals, and this shard's
/// id (a backend's answer comes back to it).
#[derive(Clone, Copy)]
pub(super) struct WillJudge<'a> {
    pub(super) control: &'a AccessControl,
    pub(super) counters: &'a ShardCounters,
    pub(super) shard: ShardId,
}

impl<'a> WillJudge<'a> {
    /// The judge of shard `shard`, by the rules in `shared`, counting in `figures`.
    pub(super) fn of(shared: &'a Shared, figures: &'a Figures, shard: ShardId) -> Self {
        Self {
            control: &shared.access,
            counters: figures.counters(),
            shard,
        }
    }

    /// Judges `connect`'s will (its client id already final) for a client its login let in
    /// with `grant`.
    pub(super) fn check_will(
        self,
        wills: &mut WillChecks,
        ctx: &Ctx,
        conn: ConnId,
        connect: &Connect,
        grant: &ClientGrant,
    ) -> WillCheck {
        let Some(will) = &connect.will else {
            return WillCheck::Pass;
        };
        let client_id = &connect.client_id;
        let topic = will.topic.as_str();
        let rules = WillRules {
            username: connect.username.clone(),
            grant: grant.restricts().then(|| Box::new(grant.clone())),
            remote: None,
        };
        let remote = || self.cached_will_answer(client_id, rules.username.as_ref(), topic);
        match self.will_verdict(client_id, &rules, topic, remote) {
            TopicVerdict::Allowed => {
                self.keep_will_rules(wills, conn, rules);
                WillCheck::Pass
            }
            TopicVerdict::Refused => {
                self.will_refused(client_id, topic, "CONNECT refused: 0x87 Not authorized");
                WillCheck::Refuse(ReasonCode::NotAuthorized)
            }
            TopicVerdict::Ask => self.ask_about_will(
                wills,
                ctx,
                conn,
                connect,
                rules.username.as_ref(),
                rules.grant.as_deref(),
            ),
        }
    }

    /// `$SYS`, the authorization hook, then the ACL file and the backend's rules.
    fn will_verdict(
        self,
        client_id: &MqttStr,
        rules: &WillRules,
        topic: &str,
        remote: impl FnOnce() -> Option<bool>,
    ) -> TopicVerdict {
        if topic.starts_with(SYS_PREFIX)
            || !self
                .control
                .hook
                .authorize_publish(client_id.as_str(), topic)
        {
            return TopicVerdict::Refused;
        }
        let grant = rules.grant.as_deref();
        super::acl_client::write_verdict(
            self.control.acl().as_deref(),
            client_id,
            rules.username.as_ref(),
            grant,
            topic,
            remote,
        )
    }

    /// The backend's cached answer about writing to `topic`.
    fn cached_will_answer(
        self,
        client_id: &MqttStr,
        username: Option<&MqttStr>,
        topic: &str,
    ) -> Option<bool> {
        let gatekeeper = self.control.gatekeeper.as_ref()?;
        let username = username.map(MqttStr::as_str);
        let key = AclKey::new(client_id.as_str(), username, topic, TopicAccess::Publish);
        gatekeeper.cached_topic(&key)
    }

    /// Asks the backend about the will's topic; the CONNECT waits for the answer.
    fn ask_about_will(
        self,
        wills: &mut WillChecks,
        ctx: &Ctx,
        conn: ConnId,
        connect: &Connect,
        username: Option<&MqttStr>,
        grant: Option<&ClientGrant>,
    ) -> WillCheck {
        let client_id = &connect.client_id;
        let topic = connect.will.as_ref().map_or("", |w| w.topic.as_str());
        let link = grant.and_then(|g| g.link);
        let (Some(gatekeeper), Some(link)) = (&self.control.gatekeeper, link) else {
            self.will_refused(client_id, topic, "CONNECT refused: no backend to ask");
            return WillCheck::Refuse(ReasonCode::NotAuthorized);
        };
        wills.next_token += 1;
        let token = wills.next_token;
        let request = AclRequest {
            client_id: client_id.as_str().to_owned(),
            username: username.map(|u| u.as_str().to_owned()),
            peer: ctx
                .peer_addr(conn)
                .unwrap_or(access::gatekeeper::workers::NO_PEER),
            topic: topic.to_owned(),
            access: TopicAccess::Publish,
        };
        let job = Job::Topics {
            shard: self.shard,
            conn,
            token,
            link,
            requests: vec![request],
        };
        if gatekeeper.submit(job).is_err() {
            tracing::debug!("CONNECT refused: auth.max_pending questions wait already");
            return WillCheck::Refuse(ReasonCode::ServerBusy);
        }
        WillCheck::Wait(token)
    }

    /// Keeps what an admitted will was judged by, for when it fires; nothing when neither an
    /// ACL file nor the client's grant restricts it (the file cannot appear by a reload).
    fn keep_will_rules(self, wills: &mut WillChecks, conn: ConnId, rules: WillRules) {
        if rules.grant.is_some() || self.control.acl().is_some() {
            wills.admitted.insert(conn, rules);
        }
    }

    /// Whether `client_id`'s will on `topic` may go out now, by the rules in force now.
    pub(super) fn will_may_fire(
        self,
        wills: &mut WillChecks,
        client_id: &MqttStr,
        topic: &str,
    ) -> bool {
        let verdict = match wills.held.remove(client_id) {
            Some(rules) => {
                // The backend cannot be asked now: its cached answer, else the one it gave at
                // CONNECT; never asked and not allowed by the local rules: refused.
                let known = rules.remote;
                let username = rules.username.as_ref();
                let remote = || {
                    self.cached_will_answer(client_id, username, topic)
                        .or(known)
                };
                self.will_verdict(client_id, &rules, topic, remote)
            }
            // Nothing restricts the client beyond `$SYS` and the hook; or a will recovered from
            // the store after a restart, whose login is not stored (it passed the ACL at
            // CONNECT).
            None if topic.starts_with(SYS_PREFIX)
                || !self
                    .control
                    .hook
                    .authorize_publish(client_id.as_str(), topic) =>
            {
                TopicVerdict::Refused
            }
            None => TopicVerdict::Allowed,
        };
        if verdict == TopicVerdict::Allowed {
            return true;
        }
        self.will_refused(
            client_id,
            topic,
            "will dropped: the rules in force refuse it",
        );
        false
    }

    /// Counts and logs a will the rules refuse.
    fn will_refused(self, client_id: &MqttStr, topic: &str, outcome: &str) {
        ShardCounters::add(&self.counters.wills_not_authorized, 1);
        warn!(
            client = client_id.as_str(),
            topic, "will not authorized: {outcome}"
        );
    }
}

impl WillChecks {
    /// The CONNECT waits for its backend's answer about the will.
    pub(super) fn wait_for_will(
        &mut self,
        conns: &mut Connections,
        conn: ConnId,
        token: u64,
        connect: Connect,
        (grant, assigned): (Box<ClientGrant>, bool),
    ) {
        if let Some(connection) = conns.get_mut(&conn) {
            connection.phase = Phase::AwaitingAuth;
        }
        let waiting = WaitingConnect {
            token,
            connect,
            grant,
            assigned,
        };
        self.waiting.insert(conn, waiting);
    }

    /// `conn`'s CONNECT completed: its session's will (if any) is the one checked for it.
    pub(super) fn will_attached(&mut self, sessions: &Sessions, conn: ConnId, client_id: &MqttStr) {
        let wills = self;
        let Some(rules) = wills.admitted.remove(&conn) else {
            wills.held.remove(client_id);
            return;
        };
        // Rules of wills that went without firing (normal DISCONNECT, session moved or
        // ended) are dropped now and then: at most about two per session held here.
        if wills.held.len() >= 64 + 2 * sessions.len() {
            wills
                .held
                .retain(|id, _| sessions.get(id).is_some_and(|s| s.will.is_some()));
        }
        wills.held.insert(client_id.clone(), rules);
    }
}

impl BrokerShard {
    /// A worker answered about a waiting CONNECT's will (`topics_answered` found no parked
    /// packet for `conn`): the CONNECT goes on, or is refused.
    pub(super) fn will_answered(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        token: u64,
        answers: &[bool],
    ) {
        let wills = &mut self.auth.topic_waits.wills;
        let Some(waiting) = wills.waiting.remove(&conn) else {
            return;
        };
        if waiting.token != token {
            wills.waiting.insert(conn, waiting);
            return;
        }
        let Some(connection) = self
            .conns
            .get_mut(&conn)
            .filter(|c| c.phase == Phase::AwaitingAuth)
        else {
            return;
        };
        connection.phase = Phase::AwaitingConnect;
        let allowed = answers.first().copied().unwrap_or(false);
        let connect = waiting.connect;
        if !allowed {
            let topic = connect.will.as_ref().map_or("", |w| w.topic.as_str());
            let reason = "CONNECT refused: 0x87 Not authorized (backend)";
            WillJudge::of(&self.shared, &self.figures, self.id).will_refused(
                &connect.client_id,
                topic,
                reason,
            );
            self.wire()
                .refuse_connect(ctx, conn, ReasonCode::NotAuthorized);
            return;
        }
        let grant = &waiting.grant;
        let rules = WillRules {
            username: connect.username.clone(),
            grant: grant.restricts().then(|| grant.clone()),
            remote: Some(true),
        };
        let wills = &mut self.auth.topic_waits.wills;
        WillJudge::of(&self.shared, &self.figures, self.id).keep_will_rules(wills, conn, rules);
        self.admit_checked(ctx, conn, connect, waiting.grant, waiting.assigned);
    }
}
