//! CONNECT credentials: anonymous access, client certificates, the password file, and the
//! backend chain (`auth.backends`), asked without blocking this reactor.
//!
//! The `file` links are answered here. The first external link ends what this shard can
//! answer itself: a cached verdict decides at once; otherwise the CONNECT waits in
//! `Phase::AwaitingAuth` (its CONNECT timeout still running) while a worker walks the rest of
//! the chain, and [`BrokerShard::take_auth_verdicts`] picks the answer up. [`Logins`] judges
//! and keeps what waits; the shard resumes or refuses the CONNECT.

use codec::{Connect, ReasonCode};
use ring_runtime::{ConnId, ShardId};
use session_store::ByteBudget;
use tracing::debug;

use super::logins::{Judgement, Logins, PendingLogin, connect_bytes};
use super::timer_book::TimerBook;
use super::{BrokerShard, Ctx};
use crate::conn::{Connections, Phase};
use crate::shared::Shared;
use crate::shared_parts::AccessControl;
use access::backend::LoginRequest;
use access::gatekeeper::chain::{Link, LoginVerdict, file_login};
use access::gatekeeper::grant::ClientGrant;
use access::gatekeeper::workers::Job;

impl BrokerShard {
    /// Answers that workers left for this shard: logins continue or end, parked packets are
    /// handled.
    pub(super) fn take_auth_verdicts(&mut self, ctx: &mut Ctx) {
        let Some(gatekeeper) = &self.shared.access.gatekeeper else {
            return;
        };
        for verdict in gatekeeper.take_verdicts(self.id) {
            match verdict {
                access::gatekeeper::workers::Verdict::Login {
                    conn,
                    token,
                    outcome,
                } => self.login_answered(ctx, conn, token, outcome),
                access::gatekeeper::workers::Verdict::Topics {
                    conn,
                    token,
                    answers,
                } => self.topics_answered(ctx, conn, token, answers),
                access::gatekeeper::workers::Verdict::Exchange {
                    conn,
                    token,
                    outcome,
                } => self.exchange_answered(ctx, conn, token, outcome),
                access::gatekeeper::workers::Verdict::Rechecked {
                    conn,
                    token,
                    outcome,
                } => self.grant_rechecked(ctx, conn, token, outcome),
            }
        }
    }

    fn login_answered(&mut self, ctx: &mut Ctx, conn: ConnId, token: u64, outcome: LoginVerdict) {
        let _span = self.conns.span(&self.sessions, self.id, conn).entered();
        let Some(pending) = self.auth.logins.pending.remove(&conn) else {
            return;
        };
        if pending.token != token {
            self.auth.logins.pending.insert(conn, pending);
            return;
        }
        self.shared.limits.partial_frames.release(pending.bytes);
        let waiting = self
            .conns
            .get_mut(&conn)
            .filter(|c| c.phase == Phase::AwaitingAuth);
        let Some(connection) = waiting else {
            return;
        };
        connection.phase = Phase::AwaitingConnect;
        let user = pending.connect.username.as_ref().map(|u| u.as_str());
        match Judgement::of(&self.shared.access, outcome, user) {
            Judgement::Admit(grant) => self.admit(ctx, conn, pending.connect, grant),
            Judgement::Refuse(reason) => self.refuse_login(ctx, conn, reason, user),
            Judgement::Wait(_) => {}
        }
    }

    /// Refuses a CONNECT of `user` for its credentials (counted against the address's failed
    /// logins, and the username's from that address).
    pub(super) fn refuse_login(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        reason: ReasonCode,
        user: Option<&str>,
    ) {
        if matches!(
            reason,
            ReasonCode::BadUserNameOrPassword | ReasonCode::NotAuthorized
        ) {
            self.login_failed_here(ctx, conn, user);
        }
        self.wire().refuse_connect(ctx, conn, reason);
    }
}

/// The refusal for credentials no backend accepted.
fn refused(user: Option<&str>) -> Judgement {
    debug!(
        user = user.unwrap_or(""),
        "CONNECT refused: bad user name or password"
    );
    Judgement::Refuse(ReasonCode::BadUserNameOrPassword)
}

impl BrokerShard {
    /// A client's credentials expired: DISCONNECT 0xA0 Maximum connect time (5.0), close.
    pub(super) fn credentials_expired(&mut self, ctx: &mut Ctx, conn: ConnId) {
        self.auth.logins.expiries.remove(&conn);
        let connected = self.conns.get(&conn).is_some_and(|c| c.is_connected());
        if !connected {
            return;
        }
        let _span = self.conns.span(&self.sessions, self.id, conn).entered();
        debug!("credentials expired: disconnecting");
        self.wire()
            .send_disconnect(ctx, conn, ReasonCode::MaximumConnectTime);
        self.wire().close_connection(ctx, conn);
    }
}

impl Logins {
    /// Judges `connect`'s credentials; `certified`: the username came from a verified client
    /// certificate, which stands for the password.
    pub(super) fn judge_login(
        &mut self,
        shared: &Shared,
        shard: ShardId,
        ctx: &Ctx,
        conn: ConnId,
        connect: &Connect,
        certified: bool,
    ) -> Judgement {
        let auth = &shared.config.auth;
        let anonymous = connect.username.is_none()
            && (connect.password.is_none() || shared.access.gatekeeper.is_none());
        if anonymous {
            if auth.anonymous_allowed() {
                return Judgement::Admit(Box::default());
            }
            debug!("CONNECT without a username refused: anonymous access is off");
            return Judgement::Refuse(ReasonCode::NotAuthorized);
        }
        if certified || !auth.authenticates() {
            return Judgement::Admit(Box::default());
        }
        let passwords = shared.access.passwords();
        let Some(gatekeeper) = &shared.access.gatekeeper else {
            // The password file alone: checked in place, nothing copied for a backend.
            return match (passwords, &connect.username) {
                (Some(passwords), Some(username)) => {
                    let password = connect.password.as_deref().unwrap_or_default();
                    if passwords.verify(username.as_str(), password) {
                        Judgement::Admit(Box::default())
                    } else {
                        refused(Some(username.as_str()))
                    }
                }
                _ => refused(connect.username.as_ref().map(|u| u.as_str())),
            };
        };
        let request = login_request(ctx, conn, connect);
        for (index, link) in gatekeeper.chain().links().iter().enumerate() {
            match link {
                Link::File => {
                    if let access::backend::LoginAnswer::Allow(_) =
                        file_login(passwords.as_deref(), &request)
                    {
                        return Judgement::Admit(Box::default());
                    }
                }
                Link::External(_) => {
                    return self.ask_backends(&shared.access, shard, conn, request, index);
                }
            }
        }
        refused(request.username.as_deref())
    }

    /// The chain from link `start` on: a cached verdict, or a job for the workers.
    fn ask_backends(
        &mut self,
        control: &AccessControl,
        shard: ShardId,
        conn: ConnId,
        request: LoginRequest,
        start: usize,
    ) -> Judgement {
        let Some(gatekeeper) = &control.gatekeeper else {
            return Judgement::Refuse(ReasonCode::NotAuthorized);
        };
        if let Some(verdict) = gatekeeper.cached_login(&request, start) {
            return Judgement::of(control, verdict, request.username.as_deref());
        }
        self.next_token += 1;
        let token = self.next_token;
        let job = Job::Login {
            shard,
            conn,
            token,
            request,
            start,
            passwords: control.passwords(),
        };
        if gatekeeper.submit(job).is_err() {
            debug!("CONNECT refused: auth.max_pending logins wait for the backends already");
            return Judgement::Refuse(ReasonCode::ServerBusy);
        }
        Judgement::Wait(token)
    }

    /// The CONNECT waits for the workers' verdict, charged to `budget` (the pre-login bytes,
    /// `limits.max_partial_frame_bytes`); `Err` gives it back when the budget cannot take it
    /// (the verdict, when it comes, finds nothing waiting).
    pub(super) fn wait_for_login(
        &mut self,
        conns: &mut Connections,
        conn: ConnId,
        (connect, token): (Connect, u64),
        budget: &ByteBudget,
    ) -> Result<(), Box<Connect>> {
        let bytes = connect_bytes(&connect);
        if !budget.try_charge(bytes) {
            return Err(Box::new(connect));
        }
        if let Some(connection) = conns.get_mut(&conn) {
            connection.phase = Phase::AwaitingAuth;
        }
        let pending = PendingLogin {
            token,
            connect,
            bytes,
        };
        if let Some(replaced) = self.pending.insert(conn, pending) {
            budget.release(replaced.bytes);
        }
        Ok(())
    }

    /// The connection ended: its login, if pending, is forgotten (the verdict is ignored).
    pub(super) fn login_closed(
        &mut self,
        timers: &mut TimerBook,
        ctx: &mut Ctx,
        (conn, budget): (ConnId, &ByteBudget),
    ) {
        if let Some(pending) = self.pending.remove(&conn) {
            budget.release(pending.bytes);
        }
        self.grants.remove(&conn);
        let expiry = self.expiries.remove(&conn);
        timers.disarm(ctx, expiry);
    }

    /// Arms the disconnect for credentials that expire (a JWT's `exp`).
    pub(super) fn arm_credentials_expiry(
        &mut self,
        timers: &mut TimerBook,
        ctx: &mut Ctx,
        conn: ConnId,
        grant: Option<&ClientGrant>,
    ) {
        let Some(expires_at) = grant.and_then(|g| g.expires_at) else {
            return;
        };
        let left = expires_at
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        let purpose = super::timer_book::TimerPurpose::CredentialsExpired(conn);
        let timer = timers.arm(ctx, ctx.now() + left, purpose);
        self.expiries.insert(conn, timer);
    }
}

impl Judgement {
    /// What a chain verdict means for the client.
    pub(super) fn of(control: &AccessControl, verdict: LoginVerdict, user: Option<&str>) -> Self {
        match verdict {
            LoginVerdict::Allowed { grant, link } => {
                if control.gatekeeper.is_none() {
                    return Self::Refuse(ReasonCode::NotAuthorized);
                }
                let checks_topics = control.link_checks_topics(link);
                match ClientGrant::from_backend(grant, link, checks_topics) {
                    Ok(grant) => Self::Admit(Box::new(grant)),
                    Err(problem) => {
                        tracing::warn!(%problem, "login refused: the backend's topic rules are invalid");
                        Self::Refuse(ReasonCode::NotAuthorized)
                    }
                }
            }
            LoginVerdict::Refused => refused(user),
            LoginVerdict::Unavailable(error) => {
                debug!(%error, "CONNECT refused: an authentication backend is unavailable");
                Self::Refuse(ReasonCode::ServerUnavailable)
            }
        }
    }
}

/// What the backends are told about a CONNECT.
fn login_request(ctx: &Ctx, conn: ConnId, connect: &Connect) -> LoginRequest {
    LoginRequest {
        client_id: connect.client_id.as_str().to_owned(),
        username: connect.username.as_ref().map(|u| u.as_str().to_owned()),
        password: connect.password.as_ref().map(|p| p.to_vec()),
        peer: ctx
            .peer_addr(conn)
            .unwrap_or(access::gatekeeper::workers::NO_PEER),
    }
}
