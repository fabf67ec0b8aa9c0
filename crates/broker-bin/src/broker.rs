//! Starting and stopping a broker: the runtime with one [`BrokerShard`] per shard.

use std::net::SocketAddr;
use std::sync::Arc;

use ring_runtime::{
    BackendKind, Clock, InheritedListeners, Runtime, RuntimeError, RuntimeHandle, ShardExits,
    ShardId,
};

use crate::auth::{AllowAll, Authenticator};
use crate::config::Config;
use crate::message::ShardMsg;
use crate::ops::{OpsListener, OpsServer};
use crate::ops_port::{Lifecycle, OpsState};
use crate::reload::ReloadState;
use crate::runtime_settings::runtime_config;
use crate::shard::BrokerShard;
use crate::shared::Shared;
use crate::store::{CHANNEL_BATCHES, StoreOpenError, StoreState, StoreThread, open_and_recover};

/// A running broker.
pub struct Broker {
    runtime: RuntimeHandle<ShardMsg>,
    shared: Arc<Shared>,
    /// The store thread, when something is stored.
    store: Option<StoreThread>,
    /// The `[[bridges]]` to other brokers, each on its own thread.
    bridges: Arc<bridge::Bridges>,
    /// The cluster thread, when `[cluster]` configures one.
    cluster: Option<cluster::ClusterThread>,
    /// The operations HTTP listener, when `[http]` configures one.
    ops: Option<OpsServer>,
    /// Serving or shutting down, for `/readyz`.
    lifecycle: Arc<Lifecycle>,
    /// The log level's control, the configuration in force, and where a reload reads the
    /// configuration from (SIGHUP and the admin API).
    live: Arc<ReloadState>,
}

/// Why a broker did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The runtime did not start (listeners, threads, io_uring).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The persistent store could not be opened or read.
    #[error(transparent)]
    Store(#[from] StoreOpenError),
    /// A TLS listener's certificate, key or CA file is unusable.
    #[error(transparent)]
    Transport(#[from] crate::transport::TransportError),
    /// The password file is unreadable or malformed.
    #[error(transparent)]
    Access(#[from] access::AccessFileError),
    /// The store thread could not be started.
    #[error("starting the store thread: {0}")]
    StoreThread(std::io::Error),
    /// The cluster thread could not be started.
    #[error("starting the cluster thread: {0}")]
    ClusterThread(std::io::Error),
    /// An authentication backend could not be set up (a key file, a URL, the workers).
    #[error(transparent)]
    Backend(#[from] access::gatekeeper::build::BackendStartError),
    /// The operations HTTP listener (`[http]`) could not be set up.
    #[error(transparent)]
    Ops(#[from] crate::ops::OpsError),
    /// A webhook (`[[webhooks]]`) could not be set up.
    #[error(transparent)]
    Webhook(#[from] webhooks::WebhookError),
}

impl Broker {
    /// Binds the listeners and starts the shards; every client, subscription and publish is
    /// allowed.
    pub fn start(config: Config) -> Result<Self, StartError> {
        Self::start_with_auth(config, Box::new(AllowAll))
    }

    /// Like [`Broker::start`], serving the listening sockets the process before handed over
    /// (an upgrade: `upgrade.rs`).
    pub fn start_upgraded(
        config: Config,
        inherited: InheritedListeners,
    ) -> Result<Self, StartError> {
        Self::start_inheriting(config, Box::new(AllowAll), Clock::System, inherited)
    }

    /// Like [`Broker::start`], with `auth` deciding on every CONNECT, SUBSCRIBE filter and
    /// PUBLISH.
    pub fn start_with_auth(
        config: Config,
        auth: Box<dyn Authenticator>,
    ) -> Result<Self, StartError> {
        Self::start_with_clock(config, auth, Clock::System)
    }

    /// Like [`Broker::start_with_auth`], with every timer (keep-alive, expiry, will delay,
    /// `$SYS`) on `clock`: tests pass a [`ring_runtime::ManualClock`] and advance it.
    pub fn start_with_clock(
        config: Config,
        auth: Box<dyn Authenticator>,
        clock: Clock,
    ) -> Result<Self, StartError> {
        Self::start_inheriting(config, auth, clock, InheritedListeners::default())
    }

    /// Like [`Broker::start_with_clock`], serving the listening sockets the process before
    /// handed over (an upgrade: `upgrade.rs`) where their addresses are configured.
    pub fn start_inheriting(
        config: Config,
        auth: Box<dyn Authenticator>,
        clock: Clock,
        inherited: InheritedListeners,
    ) -> Result<Self, StartError> {
        let hold = config.limits.free_memory_hold;
        if !ring_runtime::hold_free_memory(hold) {
            tracing::debug!(
                "limits.free_memory_hold_ms not applied: MIMALLOC_PURGE_DELAY is set, or the allocator is not mimalloc"
            );
        }
        let mut runtime_config = runtime_config(&config);
        let quic = transport::quic::QuicListeners::load(&config.listeners.quic)?;
        runtime_config.datagram_listen = quic.endpoints();
        runtime_config.clock = clock.clone();
        runtime_config.inherited = inherited;
        let shards = runtime_config.shard_count();
        let max_packet = config.limits.max_packet_size;
        let transports = crate::transport::Transports::load(&config.listeners, max_packet)?;
        let passwords = match &config.auth.password_file {
            Some(path) => Some(access::PasswordFile::load(path)?),
            None => None,
        };
        let scram = match config.auth.scram.as_ref().and_then(|s| s.file()) {
            Some(file) => Some(access::scram::ScramFile::load(file)?),
            None => None,
        };
        let acl = match &config.auth.acl_file {
            Some(path) => Some(access::AclFile::load(path)?),
            None => None,
        };
        let ops_listener = OpsListener::bind(&config.http)?;
        let opened = open_and_recover(&config.persistence)?;
        let sync = (config.persistence.sync, config.persistence.sync_interval);
        let mut shared = Shared::with_clock(config.core.clone(), shards, auth, clock);
        let bridge_board = Arc::new(bridge::BridgeBoard::default());
        shared.links.bridges = Arc::clone(&bridge_board) as Arc<dyn broker_api::BridgeFigures>;
        shared.door.transports = transports.with_hold_limit(transport_hold_limit(&shared));
        shared.door.quic = quic;
        shared.access.passwords = passwords.map(broker_core::swap::Swap::new);
        shared.access.scram = scram.map(broker_core::swap::Swap::new);
        shared.access.acl = acl.map(broker_core::swap::Swap::new);
        shared.access.gatekeeper = access::gatekeeper::build::start(&shared.config.auth, shards)?;
        let mut cluster_link = None;
        if let Some(settings) = &config.cluster {
            let (link, queues) = cluster::ClusterLink::new(settings, shards);
            let link = Arc::new(link);
            shared.links.cluster = Some(Arc::clone(&link) as Arc<dyn broker_api::ClusterPort>);
            cluster_link = Some((link, queues));
        }
        if !config.webhooks.is_empty() {
            let hooks = webhooks::Webhooks::start(config.webhooks.clone())?;
            shared.links.events = Some(Arc::new(hooks) as Arc<dyn broker_api::EventHook>);
        }
        let mut store = None;
        if let Some(mut opened) = opened {
            if config.cluster.is_some() {
                hold_stored_keys(&shared, &mut opened);
            }
            shared.persistence.next_seq =
                std::sync::atomic::AtomicU64::new(opened.max_queued_seq + 1);
            broker_core::deal::deal_recovered(
                &shared.persistence.recovery,
                &shared,
                opened.sessions,
                opened.retained,
                shards,
            );
            broker_core::delayed::deal_delayed(
                &shared.persistence.recovery,
                &shared.topic_rules.delayed,
                opened.delayed,
                shards,
            );
            let (sender, receiver) = std::sync::mpsc::sync_channel(CHANNEL_BATCHES);
            let state = Arc::new(StoreState::new(shards, Some(sender)));
            shared.persistence.store = Some(Arc::clone(&state));
            let thread = StoreThread::start(opened.storage, receiver, state, sync.0, sync.1)
                .map_err(StartError::StoreThread)?;
            store = Some(thread);
        }
        let shared = Arc::new(shared);
        let for_shards = Arc::clone(&shared);
        let runtime = Runtime::start(runtime_config, move |id| {
            with_fault_injection(BrokerShard::new(Arc::clone(&for_shards), id, shards), id)
        })?;
        shared.door.transports.set_bound(runtime.local_addrs());
        if let Some(gatekeeper) = &shared.access.gatekeeper {
            gatekeeper.set_control(runtime.control());
        }
        if let Some(state) = &shared.persistence.store {
            state.set_control(runtime.control());
            state.close_original_sender();
        }
        shared.persistence.recovery.release_seed();
        let cluster = match start_cluster(&shared, config.cluster.as_ref(), cluster_link, &runtime)
        {
            Ok(cluster) => cluster,
            Err(error) => {
                runtime.shutdown();
                return Err(StartError::ClusterThread(error));
            }
        };
        // Loading decoded everything once on this thread and the shards copied what they keep:
        // hand the loading buffers back to the OS (each shard collects its own at `Start`).
        ring_runtime::return_free_memory();
        for index in 0..shards {
            let shard = ShardId::new(index as u16);
            if runtime.post(shard, vec![ShardMsg::Start]).is_err() {
                tracing::error!(%shard, "could not start the shard's periodic work");
            }
        }
        let local_tcp = shared.door.transports.addrs_of("tcp").first().copied();
        let bridges = Arc::new(bridge::Bridges::start(
            &config.bridges,
            local_tcp,
            Arc::clone(shared.door.guard.own_links()),
            bridge_board,
        ));
        // Reloads reach the bridges through a weak handle: the shared state must not keep
        // them.
        let weak = Arc::downgrade(&bridges);
        let live = Arc::new(ReloadState::new(config.clone()));
        live.set_bridge_update(Box::new(move |config| {
            if let Some(bridges) = weak.upgrade() {
                bridges.update(&config.bridges);
            }
        }));
        let mut broker = Self {
            runtime,
            shared,
            store,
            bridges,
            cluster,
            ops: None,
            lifecycle: Arc::new(Lifecycle::default()),
            live,
        };
        if let Some(listener) = ops_listener {
            broker.serve_operations(listener)?;
        }
        broker.lifecycle.set_serving();
        Ok(broker)
    }

    /// Starts the operations HTTP listener; on failure the shards are stopped again.
    fn serve_operations(&mut self, listener: OpsListener) -> Result<(), StartError> {
        let state = OpsState {
            shared: Arc::clone(&self.shared),
            exits: self.runtime.exits(),
            admin: self.admin_port(),
            lifecycle: Arc::clone(&self.lifecycle),
            backend: self.runtime.backend(),
            quic_listeners: !self.runtime.datagram_addrs().is_empty(),
        };
        match listener.serve(Arc::new(state)) {
            Ok(server) => {
                self.ops = Some(server);
                Ok(())
            }
            Err(error) => {
                self.bridges.stop_all();
                self.runtime.shutdown();
                Err(error.into())
            }
        }
    }

    /// The address of the operations HTTP listener (port 0 resolved), when one runs.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.ops.as_ref().map(OpsServer::addr)
    }

    /// Stored writes the engine skipped so far as not following the stored state (0 unless
    /// the broker emitted an inconsistent sequence: tests check it).
    pub fn store_skipped_writes(&self) -> u64 {
        self.shared.persistence.store.as_ref().map_or(0, |s| {
            s.skipped_writes.load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// Why the persistent store failed, if it did (the broker then stops itself).
    pub fn store_failure(&self) -> Option<String> {
        let store = self.shared.persistence.store.as_ref()?;
        store.failure().map(str::to_owned)
    }

    /// Every MQTT listening socket (duplicates), to hand to the next process in an upgrade.
    pub fn listeners(&self) -> &[std::net::TcpListener] {
        self.runtime.listeners()
    }

    /// The addresses the broker accepts connections on (port 0 resolved).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        self.runtime.local_addrs()
    }

    /// The bound addresses of the listeners of one kind: "tcp", "tls", "ws", "wss" or "quic"
    /// (UDP).
    pub fn local_addrs_of(&self, kind: &str) -> Vec<SocketAddr> {
        if kind == "quic" {
            return self.runtime.datagram_addrs().to_vec();
        }
        self.shared.door.transports.addrs_of(kind)
    }

    /// Reads every TLS listener's certificate, key and CA files again: new handshakes use
    /// them, open connections keep theirs. A listener whose files fail keeps its old ones;
    /// the errors are returned.
    pub fn reload_certificates(&self) -> Vec<crate::transport::TransportError> {
        let mut errors = self.shared.door.transports.reload();
        errors.extend(self.shared.door.quic.reload());
        errors
    }

    /// What SIGHUP does: reloads the TLS certificates, the password file and the ACL file. Whatever fails
    /// to load keeps its old contents; the errors are returned.
    pub fn reload(&self) -> Vec<String> {
        self.shared.reload_files()
    }

    /// Applies what of `config` takes effect without a restart: the `[ip]` section (later
    /// connections and logins are judged by it; open connections stay), the publish rates
    /// (`limits.max_publish_rate`, `limits.max_publish_bytes_rate`: later PUBLISH packets) and
    /// `[overload]` (later accepts) and `[[bridges]]` (added, removed and changed bridges
    /// start, stop and restart). Other sections take effect at the next start.
    pub fn apply_reloadable(&self, config: &Config) {
        self.shared.door.guard.update(config.ip.clone());
        self.shared.door.abuse.update(config);
        self.shared
            .lifecycle
            .set_limit(config.log.max_lifecycle_per_sec);
        self.bridges.update(&config.bridges);
    }

    /// What SIGHUP and the admin API's reload do with a configuration that loaded: reads the
    /// certificates, password file and ACL file again ([`Broker::reload`]), puts the live keys
    /// of `config` in force (`[ip]`, the publish rates, `[overload]`, `log.level`,
    /// `log.max_lifecycle_per_sec`), and reports every other key that differs from the running
    /// configuration as taking effect at the next start.
    pub fn reload_config(&self, config: &Config) -> crate::ReloadReport {
        self.live.reload_with(&self.shared, config)
    }

    /// A reload whose new configuration did not load: it is refused whole (the running one
    /// stays); the certificates, password file and ACL file are still read again.
    pub fn reload_refused(&self, error: &crate::config::ConfigError) -> crate::ReloadReport {
        crate::reload::ReloadState::refused(&self.shared, error)
    }

    /// Hands the broker the control of the process's log level (from
    /// [`crate::logging::init`]), so that reloads can change it; a second control is returned.
    pub fn set_log_control(
        &self,
        control: crate::logging::LogControl,
    ) -> Result<(), crate::logging::LogControl> {
        self.live.set_log_control(control)
    }

    /// The log filter in force (as `RUST_LOG` would write it), once a control was handed over.
    pub fn log_filter(&self) -> Option<String> {
        self.live.log_filter()
    }

    /// Where reloads read the configuration from (the binary: the config file and flags);
    /// `raw` is what the broker started with (the admin API prints it).
    pub fn set_config_source(
        &self,
        raw: &crate::config::RawConfig,
        source: crate::reload::ConfigSource,
    ) {
        self.live.set_source(raw, source);
    }

    /// What SIGHUP does: reads the configuration from its source (see
    /// [`Self::set_config_source`]) and reloads it ([`Self::reload_config`]); without a source,
    /// reloads the certificates, password file and ACL file only.
    pub fn reload_from_source(&self) -> crate::ReloadReport {
        self.live.reload_from_source(&self.shared)
    }

    /// Each bridge's figures (connected, messages in and out, dropped, reconnects), in config
    /// order.
    pub fn bridge_stats(&self) -> Vec<bridge::BridgeStats> {
        self.bridges.stats()
    }

    /// Bans the `[ip]` guard gave after failed logins (`ringmq_ip_bans_total`).
    pub fn ip_bans_total(&self) -> u64 {
        self.shared.door.guard.bans_total()
    }

    /// The cluster link's figures, `None` on a single node.
    pub fn cluster_figures(&self) -> Option<cluster::ClusterFigures> {
        let link = self.shared.links.cluster.as_ref()?;
        Some(link.figures())
    }

    /// What the operations HTTP server answers admin requests with.
    pub fn admin_port(&self) -> admin::AdminPort {
        let live: Arc<dyn admin::LiveConfig> = self.live.clone();
        admin::AdminPort::new(self.runtime.poster(), Arc::clone(&self.shared), live)
    }

    /// The I/O backend in use.
    pub fn backend(&self) -> BackendKind {
        self.runtime.backend()
    }

    /// The number of shards.
    pub fn shard_count(&self) -> usize {
        self.runtime.shard_count()
    }

    /// The broker's counters.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.shared.metrics
    }

    /// Flushes so far that found another shard's mailbox full, all shards together.
    pub fn mailbox_full_flushes(&self) -> u64 {
        self.runtime.mailbox_full_flushes()
    }

    /// How the shards that ended so far ended, and a way to wait for the first: a shard that
    /// panics or fails ends alone, and the broker must then be stopped (every SUBACK waits for
    /// every shard).
    pub fn shard_exits(&self) -> ShardExits {
        self.runtime.exits()
    }

    /// Starts a graceful shutdown: clients get DISCONNECT 0x8B, wills go out, writes drain;
    /// `/readyz` answers 503 from now on.
    pub fn shutdown(&self) {
        self.lifecycle.set_stopping();
        // The bridges first: their DISCONNECTs reach the shards while they still run.
        self.bridges.stop_all();
        self.runtime.shutdown();
    }

    /// Waits for every shard to stop, then stops the operations listener; logs each shard's
    /// I/O counters.
    pub fn join(mut self) -> Result<(), RuntimeError> {
        let ops = self.ops.take();
        let stats = self.runtime.join();
        if let Some(mut ops) = ops {
            ops.stop();
        }
        // After the shards: the wills they published while stopping have been handed over.
        if let Some(mut cluster) = self.cluster.take() {
            cluster.stop();
        }
        // The shards are gone, and with them the last senders: the store thread commits what
        // is left and ends.
        if let Some(store) = self.store {
            store.join();
        }
        let stats = stats?;
        for (shard, stats) in stats.iter().enumerate() {
            let counters = self.shared.metrics.shard(shard);
            tracing::info!(
                shard,
                messages_sent = counters
                    .messages_sent
                    .load(std::sync::atomic::Ordering::Relaxed),
                accepted = stats.accepted,
                accepts_refused = stats.accepts_refused,
                writes = stats.writes,
                zerocopy_writes = stats.zerocopy_writes,
                recv_rearms_enobufs = stats.recv_rearms_enobufs,
                recv_buffers_released = stats.recv_buffers_released,
                mailbox_full = stats.mailbox_full,
                input_fences_expired = stats.input_fences_expired,
                "shard stopped"
            );
        }
        Ok(())
    }
}

/// Keeps the keys of the copies the recovered sessions' store holds for the cluster link (its
/// catch-up after a restart leaves those messages out); a store that cannot be read for them
/// is warned about (QoS 2 messages queued there may then come twice).
fn hold_stored_keys(shared: &Shared, opened: &mut broker_core::store::Opened) {
    match broker_core::store::stored_keys(&mut *opened.storage, &opened.sessions) {
        Ok(keys) => shared.persistence.recovery.hold_stored_keys(keys),
        Err(e) => tracing::warn!(
            error = %e,
            "the keys of the copies the store holds were not read; after this restart QoS 2 messages queued there may reach their subscribers twice"
        ),
    }
}

/// Starts the cluster thread when `[cluster]` is configured.
fn start_cluster(
    shared: &Arc<Shared>,
    settings: Option<&cluster::settings::ClusterSettings>,
    link: Option<(Arc<cluster::ClusterLink>, cluster::ClusterQueues)>,
    runtime: &RuntimeHandle<ShardMsg>,
) -> std::io::Result<Option<cluster::ClusterThread>> {
    let (Some((link, queues)), Some(settings)) = (link, settings) else {
        return Ok(None);
    };
    link.settled.set_control(runtime.control());
    link.journal_settled.set_control(runtime.control());
    cluster::ClusterThread::start(
        settings.clone(),
        queues,
        Arc::clone(&link.counters),
        Arc::new(broker_core::cluster_inbox::ShardInbox(runtime.poster())),
        shared.time.clock.clone(),
        cluster::totals::NodeContext {
            figures: node_figures(shared),
            max_queued: u64::from(shared.config.queues.max_queued_messages),
            connect_timeout: shared.config.connection.connect_timeout,
            recovered: shared.persistence.recovery.take_outlines(),
            stored_keys: shared.persistence.recovery.take_stored_keys(),
            accepted_retained: shared.persistence.recovery.take_accepted_retained(),
        },
    )
    .map(Some)
}

/// This node's figures for the cluster's totals, read from the shards' counters.
fn node_figures(shared: &Arc<Shared>) -> cluster::totals::FiguresSource {
    let shared = Arc::clone(shared);
    Arc::new(move || {
        let snapshot = shared.metrics.snapshot();
        cluster::totals::NodeFigures {
            clients: snapshot.clients_connected,
            sessions: snapshot.clients_total,
            subscriptions: snapshot.subscriptions,
            received: snapshot.messages_received,
            sent: snapshot.messages_sent,
        }
    })
}

/// Debug builds only: the test-only fault hooks of [`crate::fault_injection`].
#[cfg(debug_assertions)]
fn with_fault_injection(
    shard: BrokerShard,
    id: ShardId,
) -> crate::fault_injection::FaultInjected<BrokerShard> {
    crate::fault_injection::FaultInjected::new(shard, id)
}

/// Release builds carry no fault injection.
#[cfg(not(debug_assertions))]
fn with_fault_injection(shard: BrokerShard, _id: ShardId) -> BrokerShard {
    shard
}

/// The bounds on what a connection's TLS or WebSocket layer holds between reads: per
/// connection the largest packet (`limits.max_packet_size`, at least what a TLS handshake
/// needs), all connections together within the partial-frame budget shared with the MQTT
/// carries (`limits.max_partial_frame_bytes`).
fn transport_hold_limit(shared: &Shared) -> crate::transport::HoldLimit {
    let per_connection = shared.config.limits.max_packet_size as usize;
    let budget =
        broker_core::shared_parts::PartialFrameBudget(Arc::clone(&shared.limits.partial_frames));
    crate::transport::HoldLimit::new(per_connection, Arc::new(budget))
}
