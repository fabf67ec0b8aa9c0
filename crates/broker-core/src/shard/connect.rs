//! CONNECT: checks, the session claim in the shared directory, and CONNACK.

use std::num::{NonZeroU16, NonZeroU32};
use std::time::Duration;

use codec::{ConnAck, ConnAckProperties, Connect, MqttStr, Packet, ProtocolVersion, ReasonCode};
use ring_runtime::{ConnId, ShardId};
use router::TopicName;
use tracing::debug;

use super::claims::{Claim, claim};
use super::durability::Durability;
use super::gauges::Gauges;
use super::lifecycle::LifecycleLines;
use super::logins::Judgement;
use super::parts::Wire;
use super::transport::apply_certificate_identity;
use super::will_check::WillJudge;
use super::will_checks::WillCheck;
use super::{BrokerShard, Ctx, Fault};
use crate::conn::{Connections, Phase};
use crate::directory::{ClaimId, SessionLocation, SessionOwner};
use crate::session::Session;
use crate::settings::CoreConfig;
use crate::shared::Shared;
use session_store::storage::SessionWrite;
use session_store::{PendingWill, SessionExpiry};

impl BrokerShard {
    /// CONNECT: validate, then claim the client's session.
    pub(super) fn handle_connect(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        mut connect: Connect,
    ) -> Result<(), Fault> {
        let Some(connection) = self.conns.get_mut(&conn) else {
            return Ok(());
        };
        if !matches!(connection.phase, Phase::AwaitingConnect) {
            return Err(Fault::protocol("a second CONNECT"));
        }
        connection.protocol = connect.protocol;
        let checked = apply_certificate_identity(ctx, conn, &mut connect)
            .and_then(|certified| check_connect(&self.shared, &connect).map(|()| certified));
        let user = connect.username.as_ref().map(|u| u.as_str());
        let certified = match checked {
            Ok(certified) => certified,
            Err(reason) => {
                self.refuse_login(ctx, conn, reason, user);
                return Ok(());
            }
        };
        if self.user_banned_here(ctx, conn, user) {
            // Barred after its failed logins from this address: refused unheard (and not
            // counted again), so further guesses learn nothing.
            debug!(
                ?conn,
                "CONNECT refused: username barred from this address (ip.ban_user_after_auth_failures)"
            );
            self.wire().refuse_connect(ctx, conn, ReasonCode::Banned);
            return Ok(());
        }
        if connect.properties.authentication_method.is_some() {
            // Enhanced authentication: the method's exchange decides (`auth_exchange.rs`).
            self.start_exchange(ctx, conn, connect);
            return Ok(());
        }
        let logins = &mut self.auth.logins;
        match logins.judge_login(&self.shared, self.id, ctx, conn, &connect, certified) {
            Judgement::Admit(grant) => self.admit(ctx, conn, connect, grant),
            Judgement::Refuse(reason) => {
                let user = connect.username.as_ref().map(|u| u.as_str());
                self.refuse_login(ctx, conn, reason, user);
            }
            Judgement::Wait(token) => {
                let budget = &self.shared.limits.partial_frames;
                let waiting = (connect, token);
                if let Err(refused) = logins.wait_for_login(&mut self.conns, conn, waiting, budget)
                {
                    debug!("CONNECT refused: limits.max_partial_frame_bytes is spent");
                    let user = refused.username.as_ref().map(|u| u.as_str());
                    self.refuse_login(ctx, conn, ReasonCode::QuotaExceeded, user);
                }
            }
        }
        Ok(())
    }

    /// A CONNECT whose credentials are accepted: claim the client's session.
    pub(super) fn admit(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        mut connect: Connect,
        grant: Box<access::gatekeeper::grant::ClientGrant>,
    ) {
        if self.shared.config.auth.use_username_as_clientid {
            // mosquitto's `use_username_as_clientid`: the username is the client id.
            let Some(username) = connect.username.clone() else {
                debug!("CONNECT without a username refused: auth.use_username_as_clientid");
                return self
                    .wire()
                    .refuse_connect(ctx, conn, ReasonCode::NotAuthorized);
            };
            connect.client_id = username;
        }
        let assigned = connect
            .client_id
            .is_empty()
            .then(|| assign_client_id(&self.shared, self.id));
        if let Some(id) = &assigned {
            connect.client_id = id.clone();
        }
        // The will passes the checks a PUBLISH of this client would (`will_check.rs`).
        let judge = WillJudge::of(&self.shared, &self.figures, self.id);
        let wills = &mut self.auth.topic_waits.wills;
        match judge.check_will(wills, ctx, conn, &connect, &grant) {
            WillCheck::Pass => self.admit_checked(ctx, conn, connect, grant, assigned.is_some()),
            WillCheck::Refuse(reason) => self.wire().refuse_connect(ctx, conn, reason),
            WillCheck::Wait(token) => {
                let waiting = (grant, assigned.is_some());
                wills.wait_for_will(&mut self.conns, conn, token, connect, waiting)
            }
        }
    }

    /// A CONNECT whose credentials and will are accepted: claim the client's session.
    pub(super) fn admit_checked(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        connect: Connect,
        grant: Box<access::gatekeeper::grant::ClientGrant>,
        assigned: bool,
    ) {
        if grant.restricts() || grant.expires_at.is_some() || grant.may_change_on_reload() {
            self.auth.logins.grants.insert(conn, *grant);
        }
        // A client id the client chose may be owned by another node of a cluster.
        if !assigned && self.shared.links.cluster.is_some() {
            return self.ask_cluster_owner(ctx, conn, connect);
        }
        self.claim_session(ctx, conn, connect, assigned, None);
    }

    /// Claims the client's session on this node; `imported`: the snapshot of the session another
    /// node of the cluster released to this CONNECT.
    pub(super) fn claim_session(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        mut connect: Connect,
        assigned: bool,
        imported: Option<bytes::Bytes>,
    ) {
        let owner = owner_of(&connect);
        match claim(&self.shared, self.id, &connect.client_id, &owner) {
            Err(reason) => self.wire().refuse_connect(ctx, conn, reason),
            Ok(Claim::Fresh(subscriber)) => {
                // No `Change::Owner` to the replicas: a new key names its birth shard, which
                // is where every replica places it until it moves (`replica.rs`).
                let expiry = self.shared.config.sessions.expiry_for(&connect);
                let imported = imported
                    .filter(|_| !connect.clean_start)
                    .and_then(|snapshot| self.import_session(ctx, &snapshot, subscriber, expiry));
                let present = imported.is_some();
                let session = imported.unwrap_or_else(|| {
                    // Moved, not cloned: a client id with one owner needs no shared allocation.
                    let client_id = std::mem::take(&mut connect.client_id);
                    let max_inflight = self.shared.config.limits.max_inflight_outbound;
                    Session::new(client_id, subscriber, max_inflight)
                });
                self.complete_connect(ctx, conn, connect, session, present, assigned);
            }
            Ok(Claim::Local(claim)) => self.connect_local(ctx, conn, connect, claim),
            Ok(Claim::Remote {
                holder,
                supersedes,
                mine,
            }) => self.delivery.mobility.request_takeover(
                (&mut self.conns, &self.figures),
                ctx,
                (conn, connect),
                self.id,
                (holder, supersedes, mine),
            ),
        }
    }

    /// The session is (or is about to be) on this shard.
    fn connect_local(&mut self, ctx: &mut Ctx, conn: ConnId, connect: Connect, claim: ClaimId) {
        if self.delivery.mobility.is_pending(claim) {
            // An earlier connection here still waits for the session to arrive: the newer wins.
            let mobility = &mut self.delivery.mobility;
            if let Some(older) = mobility.replace_waiting(&mut self.conns, claim, conn, connect) {
                self.wire().close_connection(ctx, older);
            }
            return;
        }
        let client_id = connect.client_id.clone();
        let owner = owner_of(&connect);
        match self.sessions.remove(&client_id) {
            Some(mut session) => {
                self.detach_connection(ctx, &mut session, true);
                let present = !connect.clean_start;
                if connect.clean_start {
                    self.end_session_state(ctx, *session);
                    let fresh = fresh_session(&self.shared, self.id, &client_id, owner);
                    self.complete_connect(ctx, conn, connect, fresh, false, false);
                } else {
                    self.complete_connect(ctx, conn, connect, session, present, false);
                }
            }
            None => {
                let fresh = fresh_session(&self.shared, self.id, &client_id, owner);
                self.complete_connect(ctx, conn, connect, fresh, false, false);
            }
        }
    }

    /// Attaches `session` to `conn`, answers CONNACK, then resends what the session owes.
    pub(super) fn complete_connect(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        connect: Connect,
        mut session: Box<Session>,
        session_present: bool,
        assigned_id: bool,
    ) {
        if !self.conns.contains_key(&conn) {
            // The client went away while its session was being handed over: keep the session.
            self.keep_detached(ctx, session, connect.protocol);
            return;
        }
        let was_stored = self.durable.stores(session.expiry);
        let requested_expiry = crate::settings::requested_expiry_interval(&connect);
        session.expiry = self.shared.config.sessions.expiry_for(&connect);
        if was_stored && session.expiry == SessionExpiry::OnClose {
            // A stored session resumed with expiry 0 still ends when this connection closes,
            // but stays stored until then: what it queued on disk is read back and delivered,
            // and the sends and acknowledgements of its stored copies keep following the
            // store (removing it now lost the part on disk).
            session.expiry = SessionExpiry::After(0);
        }
        let props = &connect.properties;
        session.protocol = connect.protocol;
        session.will = connect.will.clone().map(|will| {
            Box::new(PendingWill {
                delay: Duration::from_secs(u64::from(
                    will.properties.will_delay_interval.unwrap_or(0),
                )),
                will,
            })
        });
        let client_receive_max = props.receive_maximum.map_or(u16::MAX, NonZeroU16::get);
        session
            .inflight
            .set_capacity(client_receive_max.min(self.shared.config.limits.max_inflight_outbound));
        self.auth
            .topic_waits
            .wills
            .will_attached(&self.sessions, conn, &session.client_id);
        self.forget_released_copy(&session.client_id);
        self.durable
            .record_connected(&session, was_stored, &owner_of(&connect));
        self.cluster_side
            .mirror_connected(&self.shared.links, ctx, &session);
        self.timers.disarm_session_timers(ctx, &mut session);
        session.conn = Some(conn);
        let filters = session.subscriptions.iter().map(|(filter, _)| filter);
        let grant = self.auth.logins.grants.remove(&conn);
        self.auth
            .logins
            .arm_credentials_expiry(&mut self.timers, ctx, conn, grant.as_ref());
        let username = connect.username.clone();
        self.auth
            .rechecks
            .track_backend_grant(conn, username.as_ref(), grant.as_ref());
        self.auth.acl_connected(
            &self.shared.access,
            conn,
            &session.client_id,
            username,
            grant,
            filters,
        );
        let keep_alive = self.shared.config.connection.keep_alive_for(&connect);
        let counted = (&*self.shared, &mut self.figures.gauges);
        let attached = (session.subscriber, keep_alive);
        self.conns
            .setup_connection(counted, ctx, conn, &connect, attached);
        let connack = connack(
            &self.shared.config,
            &connect,
            session_present,
            assigned_id.then(|| session.client_id.clone()),
            keep_alive,
            requested_expiry,
        );
        self.wire().send_packet(ctx, conn, &Packet::from(connack));
        let mut lines = LifecycleLines {
            shared: &self.shared,
            timers: &mut self.timers,
            shard: self.id,
        };
        lines.log_connected(ctx, conn, &session.client_id, &connect, keep_alive);
        // Cloned only when needed: the first clone of the session's own copy of the id gives it
        // a reference-count block (24 bytes an idle connection would keep).
        let auto_subscribes = !self.shared.config.routing.auto_subscribe.is_empty();
        let client_id = (session_present || auto_subscribes).then(|| session.client_id.clone());
        self.sessions.insert(session);
        if let Some(client_id) = client_id {
            if session_present {
                // What a resumed session owes goes out (a fresh session owes nothing).
                self.resume_session(ctx, &client_id);
            }
            self.auto_subscribe(ctx, conn, &client_id, connect.username.as_ref());
        }
        self.resume_reading(ctx, conn);
    }
}

/// The identity a CONNECT's session belongs to (its username once authenticated).
pub(super) fn owner_of(connect: &Connect) -> SessionOwner {
    SessionOwner::of(connect.username.as_ref().map(|u| u.as_str()))
}

fn connack_v5_code(reason: ReasonCode) -> ReasonCode {
    if reason.is_allowed_in(codec::PacketType::ConnAck) {
        reason
    } else {
        ReasonCode::UnspecifiedError
    }
}

/// The nearest 3.x CONNACK return code (3.x has only six).
fn connack_v3_code(reason: ReasonCode) -> ReasonCode {
    match reason {
        ReasonCode::UnsupportedProtocolVersion
        | ReasonCode::ClientIdentifierNotValid
        | ReasonCode::BadUserNameOrPassword
        | ReasonCode::NotAuthorized => reason,
        ReasonCode::Banned | ReasonCode::BadAuthenticationMethod => ReasonCode::NotAuthorized,
        _ => ReasonCode::ServerUnavailable,
    }
}

/// The CONNACK reason for a CONNECT this broker will not accept, if any.
fn check_connect(shared: &Shared, connect: &Connect) -> Result<(), ReasonCode> {
    let limits = &shared.config.connection;
    if connect.client_id.is_empty() && !connect.protocol.is_v5() && !connect.clean_start {
        return Err(ReasonCode::ClientIdentifierNotValid);
    }
    if connect.client_id.len() > usize::from(limits.max_client_id_len) {
        return Err(ReasonCode::ClientIdentifierNotValid);
    }
    if !super::auth_exchange::method_offered(shared, connect) {
        return Err(ReasonCode::BadAuthenticationMethod);
    }
    shared.access.hook.authenticate(connect)?;
    if let Some(will) = &connect.will {
        TopicName::from_mqtt_str(will.topic.clone(), &shared.limits.topics)
            .map_err(|_| ReasonCode::TopicNameInvalid)?;
        let format = will.properties.payload_format;
        if format == Some(codec::PayloadFormat::Utf8) && std::str::from_utf8(&will.payload).is_err()
        {
            return Err(ReasonCode::PayloadFormatInvalid);
        }
    }
    Ok(())
}

/// The CONNACK for an accepted connection, with the 5.0 properties that tell the client our
/// limits.
fn connack(
    config: &CoreConfig,
    connect: &Connect,
    session_present: bool,
    assigned: Option<MqttStr>,
    keep_alive: u16,
    requested_expiry: u32,
) -> ConnAck {
    let mut properties = ConnAckProperties::default();
    if connect.protocol.is_v5() {
        properties.receive_maximum = NonZeroU16::new(config.limits.receive_maximum);
        properties.maximum_packet_size = NonZeroU32::new(config.limits.max_packet_size);
        properties.topic_alias_maximum = Some(config.limits.topic_alias_maximum);
        properties.assigned_client_identifier = assigned;
        if keep_alive != connect.keep_alive {
            properties.server_keep_alive = Some(keep_alive);
        }
        // Enhanced authentication: the method, and its final data (`auth_exchange.rs`).
        properties.authentication_method = connect.properties.authentication_method.clone();
        properties.authentication_data = connect.properties.authentication_data.clone();
        let max_expiry = config.sessions.max_session_expiry.as_secs();
        if u64::from(requested_expiry) > max_expiry && requested_expiry != 0 {
            properties.session_expiry_interval =
                Some(u32::try_from(max_expiry).unwrap_or(u32::MAX));
        }
    }
    ConnAck {
        session_present: session_present && connect.protocol != ProtocolVersion::V3_1,
        reason_code: ReasonCode::Success,
        properties,
    }
}

/// A unique identifier for a client that sent an empty one (5.0 Assigned Client Identifier).
fn assign_client_id(shared: &Shared, shard: ShardId) -> MqttStr {
    let key = shared.directory.new_subscriber(shard).0;
    let nanos = shared.time.uptime().as_nanos() as u64;
    let text = format!("ringmq-{:x}-{key:x}-{nanos:x}", shard.index());
    MqttStr::from_bytes(text.into()).expect("invariant: ASCII without U+0000")
}

/// A new session with a new subscriber key, recorded in the directory for this shard (for
/// identity `owner` if the entry is new).
pub(super) fn fresh_session(
    shared: &Shared,
    shard: ShardId,
    client_id: &MqttStr,
    owner: SessionOwner,
) -> Box<Session> {
    let subscriber = shared.directory.new_subscriber(shard);
    // A newer claim elsewhere keeps its place in the directory: this session goes to it.
    shared
        .directory
        .sessions
        .entry(Box::from(client_id.as_str()))
        .and_modify(|entry| entry.subscriber = subscriber)
        .or_insert_with(|| {
            let claim = shared.directory.new_claim();
            SessionLocation::new((shard, subscriber), claim, &owner)
        });
    // No `Change::Owner` to the replicas: see the fresh claim in `claim_session`.
    Session::new(
        client_id.clone(),
        subscriber,
        shared.config.limits.max_inflight_outbound,
    )
}

impl Wire<'_> {
    /// Refuses a CONNECT with `reason` (mapped to a 3.x return code where needed), then closes.
    pub(super) fn refuse_connect(&mut self, ctx: &mut Ctx, conn: ConnId, reason: ReasonCode) {
        self.refuse_connect_for_fault(ctx, conn, reason);
        self.close_connection(ctx, conn);
    }

    /// Sends the CONNACK that refuses a connection.
    pub(super) fn refuse_connect_for_fault(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        reason: ReasonCode,
    ) {
        let Some(protocol) = self.conns.get(&conn).map(|c| c.protocol) else {
            return;
        };
        let reason_code = if protocol.is_v5() {
            connack_v5_code(reason)
        } else {
            connack_v3_code(reason)
        };
        debug!(?conn, reason = reason_code.name(), "CONNECT refused");
        self.figures
            .count_refusal(crate::metrics::Refusal::of(reason));
        let connack = ConnAck {
            session_present: false,
            reason_code,
            properties: ConnAckProperties::default(),
        };
        self.send_packet(ctx, conn, &Packet::from(connack));
    }
}

impl Durability {
    /// A session got a connection of identity `owner`: store its connection-scoped state and
    /// owner if it outlives the connection (with its subscriptions, if it was not stored
    /// before), or remove it from the store if it no longer does.
    fn record_connected(&mut self, session: &Session, was_stored: bool, owner: &SessionOwner) {
        let client_id = &session.client_id;
        if !self.stores(session.expiry) {
            if was_stored {
                let client_id = client_id.clone();
                self.record(SessionWrite::SessionRemoved { client_id });
            }
            return;
        }
        self.record_saved(session, owner);
        if was_stored {
            return;
        }
        for (filter, subscription) in session.subscriptions.iter() {
            self.record(SessionWrite::Subscribed {
                client_id: client_id.clone(),
                filter: filter.clone(),
                options: subscription.options,
                id: subscription.id,
            });
        }
    }
}

impl Connections {
    /// Connection state from the CONNECT; its keep-alive counts from now (`gauges` count
    /// the client connected).
    fn setup_connection(
        &mut self,
        (shared, gauges): (&Shared, &mut Gauges),
        ctx: &mut Ctx,
        conn: ConnId,
        connect: &Connect,
        (subscriber, keep_alive): (router::SubscriberId, u16),
    ) {
        let since_start = shared.time.since_start(ctx.now());
        let limits = &shared.config.limits;
        let props = &connect.properties;
        let outbound_aliases = props
            .topic_alias_maximum
            .unwrap_or(0)
            .min(limits.outbound_topic_alias_maximum);
        let inbound_aliases = if connect.protocol.is_v5() {
            limits.topic_alias_maximum
        } else {
            0
        };
        let Some(connection) = self.get_mut(&conn) else {
            return;
        };
        connection.phase = Phase::Connected;
        if !connection.counted {
            connection.counted = true;
            gauges.connected_clients += 1;
        }
        connection.protocol = connect.protocol;
        connection.attach(subscriber);
        connection.keep_alive = keep_alive;
        connection.set_topic_alias_maximums(inbound_aliases, outbound_aliases);
        connection.client_max_packet = props.maximum_packet_size.map_or(u32::MAX, NonZeroU32::get);
        connection.publish_will = true;
        connection.connected_at_s = u32::try_from(since_start.as_secs()).unwrap_or(u32::MAX);
        // The keep-alive counts from the CONNACK (`Connection::deadline`).
        connection.touch(since_start);
    }
}
