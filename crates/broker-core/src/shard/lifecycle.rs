//! The connection lifecycle lines at info level (`client connected`, `client disconnected`),
//! bounded by `log.max_lifecycle_per_sec` (`crate::lifecycle`). Nothing is formatted,
//! and the peer address is not looked up, unless the line is enabled and admitted.

use broker_api::{BrokerEvent, EventKind};
use codec::{Connect, MqttStr, ProtocolVersion};
use ring_runtime::{CloseReason, ConnId, ShardId};
use tracing::Level;

use super::Ctx;
use super::timer_book::TimerBook;
use super::timer_book::TimerPurpose;
use crate::lifecycle::{Admit, Lifecycle, TARGET};
use crate::shared::Shared;

/// How long after the first suppressed line its summary is written.
const SUMMARY_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// What a lifecycle line needs: the broker's bound on them, the timer book (for the summary of
/// the suppressed ones) and this shard's id (in every line).
pub(super) struct LifecycleLines<'a> {
    pub(super) shared: &'a Shared,
    pub(super) timers: &'a mut TimerBook,
    pub(super) shard: ShardId,
}

impl LifecycleLines<'_> {
    /// A CONNECT was accepted: `client connected` with its id, address, protocol, clean start,
    /// keep-alive in force and username.
    pub(super) fn log_connected(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        client_id: &MqttStr,
        connect: &Connect,
        keep_alive: u16,
    ) {
        if let Some(hook) = self.shared.links.events_of(EventKind::ClientConnected) {
            hook.post(BrokerEvent::ClientConnected {
                client_id: client_id.as_str().to_owned(),
                username: connect.username.as_ref().map(|u| u.as_str().to_owned()),
                peer: ctx.peer_addr(conn).ok(),
                protocol: protocol_level(connect.protocol),
                clean_start: connect.clean_start,
                keep_alive,
            });
        }
        if !self.admitted(ctx, Lifecycle::Connected, Level::INFO) {
            return;
        }
        let peer = ctx.peer_addr(conn).ok();
        tracing::info!(
            target: TARGET,
            client = client_id.as_str(),
            peer = peer.map(tracing::field::display),
            protocol = protocol_name(connect.protocol),
            clean_start = connect.clean_start,
            keep_alive,
            username = connect.username.as_ref().map(MqttStr::as_str),
            shard = self.shard.index(),
            "client connected"
        );
    }

    /// A connected client's connection closed: `client disconnected` with its id, protocol
    /// and why the connection ended.
    pub(super) fn log_disconnected(
        &mut self,
        ctx: &mut Ctx,
        client_id: &MqttStr,
        protocol: ProtocolVersion,
        reason: CloseReason,
    ) {
        if let Some(hook) = self.shared.links.events_of(EventKind::ClientDisconnected) {
            hook.post(BrokerEvent::ClientDisconnected {
                client_id: client_id.as_str().to_owned(),
                reason: format!("{reason:?}"),
            });
        }
        if !self.admitted(ctx, Lifecycle::Disconnected, Level::INFO) {
            return;
        }
        tracing::info!(
            target: TARGET,
            client = client_id.as_str(),
            protocol = protocol_name(protocol),
            ?reason,
            shard = self.shard.index(),
            "client disconnected"
        );
    }

    /// A socket refused at accept because `max` connections are open: a warn line, bounded
    /// like the lifecycle lines.
    pub(super) fn log_refused_at_max(
        &mut self,
        ctx: &mut Ctx,
        peer: std::net::SocketAddr,
        max: usize,
    ) {
        if self.admitted(ctx, Lifecycle::RefusedAtMax, Level::WARN) {
            tracing::warn!(target: TARGET, %peer, max, "connection refused: max_connections reached");
        }
    }

    /// A TLS client certificate refused for a cause the operator can fix: a warn line with
    /// the cause and the fix, bounded like the lifecycle lines; whether it was written.
    pub(super) fn log_certificate_refused(
        &mut self,
        ctx: &mut Ctx,
        peer: std::net::SocketAddr,
        refusal: transport::CertificateRefusal,
    ) -> bool {
        let admitted = self.admitted(ctx, Lifecycle::CertificateRefused, Level::WARN);
        if admitted {
            tracing::warn!(target: TARGET, %peer, "TLS client certificate refused: {refusal}");
        }
        admitted
    }

    /// Whether a line of `kind` at `level` is written now; a suppressed one is counted, and the
    /// first of a run arms its summary.
    fn admitted(&mut self, ctx: &mut Ctx, kind: Lifecycle, level: Level) -> bool {
        let enabled = match level {
            Level::WARN => tracing::enabled!(target: TARGET, Level::WARN),
            _ => tracing::enabled!(target: TARGET, Level::INFO),
        };
        if !enabled {
            return false;
        }
        let second = self.shared.time.since_start(ctx.now()).as_secs();
        match self.shared.lifecycle.admit(kind, second) {
            Admit::Log => true,
            Admit::Off | Admit::Suppressed { first: false } => false,
            Admit::Suppressed { first: true } => {
                let at = ctx.now() + SUMMARY_AFTER;
                self.timers
                    .arm(ctx, at, TimerPurpose::LifecycleSummary(kind));
                false
            }
        }
    }
}

/// The MQTT version as operators write it.
/// The protocol level a CONNECT names (3, 4 or 5).
fn protocol_level(protocol: ProtocolVersion) -> u8 {
    match protocol {
        ProtocolVersion::V3_1 => 3,
        ProtocolVersion::V3_1_1 => 4,
        ProtocolVersion::V5 => 5,
    }
}

fn protocol_name(protocol: ProtocolVersion) -> &'static str {
    match protocol {
        ProtocolVersion::V3_1 => "3.1",
        ProtocolVersion::V3_1_1 => "3.1.1",
        ProtocolVersion::V5 => "5.0",
    }
}
