//! The parts of [`crate::shared::Shared`]: each groups what one concern keeps for all shards.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use dashmap::DashMap;
use ring_runtime::{Clock, ShardId};
use router::{ChangeSeq, Sequencer, SubscriberId, TopicLimits};
use session_store::{ByteBudget, QueueLimits};

use crate::auth::Authenticator;
use crate::directory::BIRTH_SHARD_BITS;
use crate::directory::{ClaimId, SessionLocation, SessionOwner};
use crate::settings::CoreConfig;
use crate::store::{Recovery, StoreState};
use crate::swap::Swap;
use access::settings::AuthSettings;

/// Client identifier -> the shard that holds its session (the takeover directory), and the
/// counters that hand out subscriber keys and claim ids.
pub struct SessionDirectory {
    /// Keyed by a copy of the id in an exact-size allocation: a 16-byte key instead of a
    /// 32-byte `Bytes` handle, and the session's own id stays unshared (no reference-count
    /// block).
    pub sessions: DashMap<Box<str>, SessionLocation>,
    /// Hands out subscriber keys: 64 bits, so a key is never handed out twice (at a million
    /// sessions a second the counter would last 584,000 years).
    pub next_subscriber: AtomicU64,
    /// Hands out claim ids.
    next_claim: AtomicU32,
    /// Client ids whose session this node released to another node while its stored copy
    /// stays, until the owner record names that node (`shard/release.rs`): at most one entry
    /// per stored session.
    released_copies: DashMap<Box<str>, ()>,
}

impl SessionDirectory {
    pub fn new(sessions: DashMap<Box<str>, SessionLocation>) -> Self {
        Self {
            sessions,
            next_subscriber: AtomicU64::new(1),
            next_claim: AtomicU32::new(0),
            released_copies: DashMap::new(),
        }
    }

    /// A new subscriber key for a session created on `shard`, never handed out before in this
    /// broker run (a reused key would receive another session's messages). Its low
    /// [`BIRTH_SHARD_BITS`] name `shard` ([`crate::directory::birth_shard`]): the replicas record
    /// a session's shard only once it has moved elsewhere.
    pub fn new_subscriber(&self, shard: ShardId) -> SubscriberId {
        let count = self.next_subscriber.fetch_add(1, Ordering::Relaxed);
        assert!(
            count < 1 << (u64::BITS - BIRTH_SHARD_BITS),
            "invariant: 2^48 subscriber keys are never exhausted"
        );
        SubscriberId(count << BIRTH_SHARD_BITS | shard.index() as u64)
    }

    /// A new claim id.
    pub fn new_claim(&self) -> ClaimId {
        ClaimId(self.next_claim.fetch_add(1, Ordering::Relaxed))
    }

    /// `client_id`'s session was released to another node; its stored copy stays here.
    pub fn mark_released_copy(&self, client_id: &str) {
        self.released_copies.insert(Box::from(client_id), ());
    }

    /// Whether a stored copy of a session released to another node is left of `client_id`
    /// (forgotten now: the caller removes it from the store).
    pub fn take_released_copy(&self, client_id: &str) -> bool {
        self.released_copies.remove(client_id).is_some()
    }

    /// The identity the session of `client_id` belongs to, as its entry names it (`Unbound`
    /// if it has none: no session of that id is held).
    pub fn owner_of(&self, client_id: &str) -> SessionOwner {
        (self.sessions.get(client_id)).map_or(SessionOwner::Unbound, |entry| entry.owner())
    }
}

/// The total order of replicated changes.
pub struct ChangeOrder {
    /// Orders every replicated change.
    sequencer: Sequencer,
    /// Per shard: how far it has applied the change order (for forwarding clean-up).
    pub applied: Box<[CachePadded<AtomicU64>]>,
    /// Every subscription change below this place in the order is stamped: a shard matches a
    /// PUBLISH only once it has applied that far (`shard/publish_order.rs`). Apart from the
    /// sequencer, which every change moves, so a publish reads a line only subscriptions write.
    subscriptions_stamped: CachePadded<AtomicU64>,
    /// Likewise for removals alone (UNSUBSCRIBE, a session's end): with
    /// `runtime.subscribe_order = "received"` a PUBLISH is routed at once unless one of them is
    /// in flight (`shard/order_kept.rs`).
    removals_stamped: CachePadded<AtomicU64>,
}

/// What kind of change [`ChangeOrder::stamp`] orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StampedChange {
    /// A subscription added (or replaced).
    Subscribe,
    /// A subscription removed.
    Unsubscribe,
    /// Anything else (owners, retained messages).
    Other,
}

impl ChangeOrder {
    /// The order of a broker with `shards` shards, before any change.
    pub fn new(shards: usize) -> Self {
        Self {
            sequencer: Sequencer::new(),
            applied: (0..shards).map(|_| CachePadded::default()).collect(),
            subscriptions_stamped: CachePadded::default(),
            removals_stamped: CachePadded::default(),
        }
    }

    /// The next place in the order, for a change about to be sent to every shard; a
    /// subscription change also moves [`Self::subscription_horizon`] past it, a removal
    /// [`Self::removal_horizon`] as well.
    pub fn stamp(&self, kind: StampedChange) -> ChangeSeq {
        let seq = self.sequencer.next();
        if kind != StampedChange::Other {
            self.subscriptions_stamped
                .fetch_max(seq.0 + 1, Ordering::Release);
        }
        if kind == StampedChange::Unsubscribe {
            self.removals_stamped
                .fetch_max(seq.0 + 1, Ordering::Release);
        }
        seq
    }

    /// Past every subscription removal stamped so far.
    pub fn removal_horizon(&self) -> ChangeSeq {
        ChangeSeq(self.removals_stamped.load(Ordering::Acquire))
    }

    /// How far a shard must have applied the order before it matches a PUBLISH it handles
    /// now: past every subscription change stamped so far.
    pub fn subscription_horizon(&self) -> ChangeSeq {
        ChangeSeq(self.subscriptions_stamped.load(Ordering::Acquire))
    }
}

/// The broker-wide limits every shard checks.
pub struct SharedLimits {
    /// Topic validation limits from the config.
    pub topics: TopicLimits,
    /// The bounds of every session's queue, with the broker-wide queued-bytes budget.
    pub queues: QueueLimits,
    /// Bytes held in partial frames over all connections (`limits.max_partial_frame_bytes`):
    /// the MQTT carries, and what TLS and WebSocket layers hold between reads
    /// ([`PartialFrameBudget`]).
    pub partial_frames: Arc<ByteBudget>,
    /// What send queues hold, per connection and over the broker (`queues.outbound_bytes`,
    /// `queues.max_total_outbound_bytes`).
    pub outbound: crate::outbound::OutboundBudget,
}

/// The partial-frame budget as the transports' shared budget: what a TLS or WebSocket layer
/// holds between reads is charged with the MQTT carries (see `Transports::with_hold_limit`).
pub struct PartialFrameBudget(pub Arc<ByteBudget>);

impl transport::SharedBudget for PartialFrameBudget {
    fn try_charge(&self, bytes: u64) -> bool {
        self.0.try_charge(bytes)
    }

    fn release(&self, bytes: u64) {
        self.0.release(bytes);
    }
}

/// Who may do what: the embedding's hook and the configured `[auth]`.
pub struct AccessControl {
    /// The authentication and authorization hook.
    pub hook: Box<dyn Authenticator>,
    /// The password file's users, when `auth.password_file` is set (swapped on reload).
    pub passwords: Option<Swap<access::PasswordFile>>,
    /// The SCRAM credentials, when `[auth.scram]` is set (swapped on reload).
    pub scram: Option<Swap<access::scram::ScramFile>>,
    /// The ACL file's rules, when `auth.acl_file` is set (swapped on reload).
    pub acl: Option<Swap<access::AclFile>>,
    /// The external authentication backends and their workers (`auth.backends` naming any).
    pub gatekeeper: Option<access::gatekeeper::Gatekeeper>,
    /// Bumped whenever the ACL file is read again: a client connected under an older version
    /// has every delivery checked against the rules in force (`shard/acl.rs`).
    pub rules_epoch: AtomicU64,
    /// Bumped whenever the backends' answers are forgotten (a reload): each shard then asks
    /// the backends again about the grants of its connected clients (`shard/grant_recheck.rs`).
    pub grants_epoch: AtomicU64,
}

impl AccessControl {
    pub fn new(hook: Box<dyn Authenticator>) -> Self {
        Self {
            hook,
            passwords: None,
            scram: None,
            acl: None,
            gatekeeper: None,
            rules_epoch: AtomicU64::new(0),
            grants_epoch: AtomicU64::new(0),
        }
    }

    /// Whether chain link `link` is a backend asked about each topic (HTTP with an ACL URL).
    pub fn link_checks_topics(&self, link: usize) -> bool {
        let gatekeeper = self.gatekeeper.as_ref();
        match gatekeeper.and_then(|g| g.chain().links().get(link)) {
            Some(access::gatekeeper::chain::Link::External(backend)) => backend.checks_topics(),
            _ => false,
        }
    }

    /// The password file in force, if one is configured.
    pub fn passwords(&self) -> Option<Arc<access::PasswordFile>> {
        self.passwords.as_ref().map(Swap::get)
    }

    /// The rules' epoch now (see [`Self::rules_epoch`]).
    pub fn rules_epoch(&self) -> u64 {
        self.rules_epoch.load(Ordering::Acquire)
    }

    /// The backends' grants epoch now (see [`Self::grants_epoch`]).
    pub fn grants_epoch(&self) -> u64 {
        self.grants_epoch.load(Ordering::Acquire)
    }

    /// The ACL in force, if one is configured.
    pub fn acl(&self) -> Option<Arc<access::AclFile>> {
        self.acl.as_ref().map(Swap::get)
    }

    /// Reloads the password file, the SCRAM credentials and the ACL file, and empties the backends' caches. Whatever
    /// fails to load keeps its old contents; the errors are returned.
    pub fn reload(&self, auth: &AuthSettings) -> Vec<String> {
        let mut errors = Vec::new();
        if let Err(error) = self.reload_passwords(auth) {
            errors.push(error.to_string());
        }
        if let Err(error) = self.reload_scram(auth) {
            errors.push(error.to_string());
        }
        if let Err(error) = self.reload_acl(auth) {
            errors.push(error.to_string());
        }
        if let Some(gatekeeper) = &self.gatekeeper {
            // Credentials or rules may have changed behind the backends too.
            gatekeeper.forget_answers();
            self.grants_epoch.fetch_add(1, Ordering::Release);
        }
        errors
    }

    /// Reads the ACL file again; on failure the old rules stay in force. Connected clients'
    /// subscriptions keep their admission; what leaves is checked against the new rules where
    /// a subscription was only partly readable.
    pub fn reload_acl(&self, auth: &AuthSettings) -> Result<(), access::AccessFileError> {
        let (Some(acl), Some(path)) = (&self.acl, &auth.acl_file) else {
            return Ok(());
        };
        acl.replace(access::AclFile::load(path)?);
        self.rules_epoch.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// The SCRAM credentials in force, if `[auth.scram]` is configured.
    pub fn scram(&self) -> Option<Arc<access::scram::ScramFile>> {
        self.scram.as_ref().map(Swap::get)
    }

    /// Reads the SCRAM credential file again; on failure the old credentials stay in force.
    fn reload_scram(&self, auth: &AuthSettings) -> Result<(), access::AccessFileError> {
        let file = auth.scram.as_ref().and_then(|settings| settings.file());
        let (Some(scram), Some(file)) = (&self.scram, file) else {
            return Ok(());
        };
        scram.replace(access::scram::ScramFile::load(file)?);
        Ok(())
    }

    /// Reads the password file again; on failure the old users stay in force.
    fn reload_passwords(&self, auth: &AuthSettings) -> Result<(), access::AccessFileError> {
        let (Some(passwords), Some(path)) = (&self.passwords, &auth.password_file) else {
            return Ok(());
        };
        passwords.replace(access::PasswordFile::load(path)?);
        Ok(())
    }
}

/// What stands at the door: the listeners, how many connections are open, the `[ip]` guard,
/// publish rates and overload mode.
pub struct Door {
    /// The TLS and WebSocket listeners (certificates, paths).
    pub transports: transport::Transports,
    /// Connections open now, over all shards (for `max_connections`).
    pub connections: AtomicUsize,
    /// The `[ip]` guard: address lists and per-address limits.
    pub guard: crate::guard::IpGuard,
    /// Publish rates and overload mode (reloadable).
    pub abuse: crate::abuse::AbuseLimits,
    /// The QUIC listeners: their certificates (reloaded with the TLS ones) and what their
    /// drivers count (`/metrics` `ringmq_quic_*`).
    pub quic: transport::quic::QuicListeners,
}

impl Door {
    pub fn new(config: &CoreConfig) -> Self {
        Self {
            transports: transport::Transports::plain(),
            connections: AtomicUsize::new(0),
            guard: crate::guard::IpGuard::new(config.ip.clone()),
            abuse: crate::abuse::AbuseLimits::new(config),
            quic: transport::quic::QuicListeners::default(),
        }
    }
}

/// The runtime's clock, and when the broker started on it.
pub struct BrokerTime {
    /// The runtime's clock (the shards read it through `ShardCtx::now`).
    pub clock: Clock,
    /// When the broker started (for `$SYS/broker/uptime`), on [`Self::clock`].
    pub started: Instant,
}

impl BrokerTime {
    pub fn new(clock: Clock) -> Self {
        Self {
            started: clock.now(),
            clock,
        }
    }

    /// Time from the broker's start to `now` (connection records keep their times this way: 8
    /// bytes instead of an `Instant`'s 16).
    pub fn since_start(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }

    /// Time since the broker started, on its clock.
    pub fn uptime(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.started)
    }
}

/// What persistence shares.
pub struct Persistence {
    /// What the store thread publishes (`None` with `persistence.engine = "none"`).
    pub store: Option<Arc<StoreState>>,
    /// State recovered at start-up, until the shards take it.
    pub recovery: Recovery,
    /// The next stored-queue sequence number (above every recovered one).
    pub next_seq: AtomicU64,
}

impl Default for Persistence {
    fn default() -> Self {
        Self {
            store: None,
            recovery: Recovery::default(),
            next_seq: AtomicU64::new(1),
        }
    }
}

impl Persistence {
    /// A new stored-queue sequence number: increasing broker-wide, so a session's stored queue
    /// keeps its order wherever the session moves.
    pub fn new_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }
}

/// The broker's links to other brokers.
pub struct Links {
    /// The running bridges' figures (for `$SYS/broker/bridges/...`).
    pub bridges: Arc<dyn broker_api::BridgeFigures>,
    /// The cluster link (`[cluster]`), `None` on a single node.
    pub cluster: Option<Arc<dyn broker_api::ClusterPort>>,
    /// Where events go (`[[webhooks]]`), `None` when nothing wants them.
    pub events: Option<Arc<dyn broker_api::EventHook>>,
    /// The live traces the admin API started (`crate::trace`).
    pub traces: Arc<crate::trace::Traces>,
}

impl Links {
    /// The event hook, if it wants events of `kind`.
    pub fn events_of(&self, kind: broker_api::EventKind) -> Option<&dyn broker_api::EventHook> {
        (self.events.as_deref()).filter(|hook| hook.wants(kind))
    }

    /// Whether shard `shard` reports local interest to the cluster link: shard 0 (every shard
    /// applies every subscription change, in the same order; one of them reports), when
    /// `[cluster]` is on.
    pub fn reports_interest(&self, shard: ShardId) -> bool {
        shard.index() == 0 && self.cluster.is_some()
    }

    /// Reports one more (`delta` 1) or one fewer (-1) local subscription to `filter` to the
    /// cluster link, if there is one.
    pub fn report_interest(&self, filter: &str, delta: i32) {
        if let Some(link) = self.cluster.as_ref().filter(|_| delta != 0) {
            link.interest(filter, delta);
        }
    }

    /// Whether the shared subscriptions matching a message on `topic`, handed to the cluster,
    /// are served by NATS's queue groups rather than here: while NATS is connected, for every
    /// topic but `$SYS` (whose filters take no NATS subscription).
    pub fn shares_served_by_cluster(&self, topic: &router::TopicName) -> bool {
        self.cluster
            .as_ref()
            .is_some_and(|link| link.connected() && !topic.as_str().starts_with("$SYS"))
    }

    /// A session ended here (not moved): its owner record in the cluster goes
    /// (`MirrorOp::Ended`).
    pub fn owner_record_ended(&self, client_id: &codec::MqttStr) {
        if let Some(link) = &self.cluster {
            link.mirror(broker_api::cluster::MirrorOp::Ended {
                client_id: client_id.clone(),
            });
        }
    }
}

impl Default for Links {
    fn default() -> Self {
        Self {
            bridges: Arc::new(NoBridges),
            cluster: None,
            events: None,
            traces: Arc::default(),
        }
    }
}

/// The figures of a broker that runs no bridges.
struct NoBridges;

impl broker_api::BridgeFigures for NoBridges {
    fn stats(&self) -> Vec<broker_api::BridgeStats> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::directory::birth_shard;

    /// The 2^32nd session gets a fresh key, not key 0 again (a 32-bit counter wrapped there).
    #[test]
    fn subscriber_keys_do_not_wrap_at_32_bits() {
        let directory = SessionDirectory::new(DashMap::new());
        let shard = ShardId::new(0);
        let first = directory.new_subscriber(shard);
        (directory.next_subscriber).store(u64::from(u32::MAX), Ordering::Relaxed);
        let keys: Vec<SubscriberId> = (0..3).map(|_| directory.new_subscriber(shard)).collect();
        assert_eq!(keys[0].0 >> BIRTH_SHARD_BITS, u64::from(u32::MAX));
        assert!(keys[1].0 > keys[0].0 && keys[2].0 > keys[1].0);
        assert!(keys.iter().all(|k| *k != first));
    }

    /// A key names the shard it was handed out on, the highest shard id included, and keys
    /// handed out on different shards never collide.
    #[test]
    fn a_subscriber_key_names_its_birth_shard() {
        let directory = SessionDirectory::new(DashMap::new());
        let shards = [0, 1, 7, u16::MAX].map(ShardId::new);
        let keys: Vec<SubscriberId> = shards
            .iter()
            .map(|s| directory.new_subscriber(*s))
            .collect();
        for (key, shard) in keys.iter().zip(shards) {
            assert_eq!(birth_shard(*key), shard);
            assert_ne!(key.0, 0, "session keys are non-zero");
        }
        let distinct: std::collections::HashSet<_> = keys.iter().map(|k| k.0).collect();
        assert_eq!(distinct.len(), keys.len());
    }
}
