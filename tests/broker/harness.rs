//! A broker per test: the embedded defaults, two shards on `127.0.0.1:0`, `$SYS` off, plus the
//! test's own TOML overrides. Stopped (shutdown + join) when dropped.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use codec::QoS;
use ring_runtime::{Clock, ManualClock};
use ringmq::Broker;
use ringmq::config::{default_raw, parse_raw};
use ringmq::metrics::{ShardCounters, Snapshot};

use crate::client::{ProtocolVersion, RawClient, V5};

/// Every test broker listens on an ephemeral port with two shards, so cross-shard paths run.
pub const BASE: &str = r#"
[listeners]
tcp = ["127.0.0.1:0"]
[runtime]
shards = 2
[sys]
interval = 0
[persistence]
engine = "none"
"#;

/// Longest a bounded poll waits before the test fails.
pub const POLL_DEADLINE: Duration = Duration::from_secs(10);

/// A running broker, stopped at drop.
pub struct TestBroker {
    broker: Option<Broker>,
    addr: SocketAddr,
    /// The clock the broker runs on, when the test drives it.
    manual: Option<ManualClock>,
}

impl TestBroker {
    /// A broker with the test defaults.
    pub fn start() -> Self {
        Self::with_config("")
    }

    /// A broker with `overrides` (TOML) over the test defaults.
    pub fn with_config(overrides: &str) -> Self {
        Self::with_auth(overrides, Box::new(ringmq::auth::AllowAll))
    }

    /// A broker with `overrides` (TOML) over the test defaults and `auth` as its hook.
    pub fn with_auth(overrides: &str, auth: Box<dyn ringmq::auth::Authenticator>) -> Self {
        Self::launch(overrides, auth, None)
    }

    /// A broker with `overrides` that stores its state on disk: a store still locked by the
    /// previous broker of the same test (sled releases its file lock from a background thread
    /// shortly after it is dropped) is retried for a few seconds.
    pub fn with_store(overrides: &str) -> Self {
        let mut raw = default_raw().expect("embedded defaults parse");
        raw.overlay(parse_raw("test base", BASE).expect("test base parses"));
        raw.overlay(parse_raw("test overrides", overrides).expect("test overrides parse"));
        let config = raw.validate().expect("test config validates");
        let deadline = Instant::now() + Duration::from_secs(5);
        let broker = loop {
            match Broker::start(config.clone()) {
                Ok(broker) => break broker,
                Err(ringmq::StartError::Store(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(error) => panic!("broker starts: {error}"),
            }
        };
        let addr = broker.local_addrs()[0];
        Self {
            broker: Some(broker),
            addr,
            manual: None,
        }
    }

    /// A broker with `overrides` whose time stands still until [`Self::advance`]: keep-alive,
    /// expiry and will-delay tests move the clock instead of sleeping.
    pub fn with_manual_clock(overrides: &str) -> Self {
        Self::launch(
            overrides,
            Box::new(ringmq::auth::AllowAll),
            Some(ManualClock::new()),
        )
    }

    fn launch(
        overrides: &str,
        auth: Box<dyn ringmq::auth::Authenticator>,
        manual: Option<ManualClock>,
    ) -> Self {
        let mut raw = default_raw().expect("embedded defaults parse");
        raw.overlay(parse_raw("test base", BASE).expect("test base parses"));
        raw.overlay(parse_raw("test overrides", overrides).expect("test overrides parse"));
        let config = raw.validate().expect("test config validates");
        let clock = manual.clone().map_or(Clock::System, Clock::Manual);
        let broker = Broker::start_with_clock(config, auth, clock).expect("broker starts");
        let addr = broker.local_addrs()[0];
        Self {
            broker: Some(broker),
            addr,
            manual,
        }
    }

    /// Moves the broker's manual clock forward by `by`; its shards wake and fire the timers due.
    pub fn advance(&self, by: Duration) {
        self.manual
            .as_ref()
            .expect("advance needs TestBroker::with_manual_clock")
            .advance(by);
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound address of the (first) listener of `kind`: "tcp", "tls", "ws" or "wss".
    pub fn addr_of(&self, kind: &str) -> SocketAddr {
        let addrs = self.broker().local_addrs_of(kind);
        *addrs
            .first()
            .unwrap_or_else(|| panic!("the test broker has no {kind} listener"))
    }

    /// Every bound listener address, in bind order (`tcp`, `proxy_tcp`, then the tables).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.broker().local_addrs().to_vec()
    }

    /// Connections refused so far for `refusal`, over every shard.
    pub fn refused(&self, refusal: ringmq::metrics::Refusal) -> u64 {
        let metrics = self.broker().metrics();
        (0..self.broker().shard_count())
            .map(|i| metrics.detail(i).refused[refusal.index()].load(Ordering::Relaxed))
            .sum()
    }

    /// The bound address of the operations HTTP listener (`[http] bind`).
    pub fn http_addr(&self) -> SocketAddr {
        self.broker()
            .http_addr()
            .expect("the test broker has an [http] listener")
    }

    /// Applies the reloadable part of the test defaults with `overrides` (what SIGHUP does
    /// with the config file).
    pub fn apply_reloadable(&self, overrides: &str) {
        self.broker().apply_reloadable(&test_config(overrides));
    }

    /// Reloads with the test defaults and `overrides` as the new configuration (what SIGHUP
    /// does with a config file that loads); the report.
    pub fn reload_config(&self, overrides: &str) -> ringmq::ReloadReport {
        self.broker().reload_config(&test_config(overrides))
    }

    /// A reload whose configuration did not load (what SIGHUP does then); the report.
    pub fn reload_refused(&self, error: &ringmq::config::ConfigError) -> ringmq::ReloadReport {
        self.broker().reload_refused(error)
    }

    /// Hands the broker a log level control (see `ringmq::logging::LogControl::detached`).
    pub fn set_log_control(&self, control: ringmq::logging::LogControl) {
        assert!(self.broker().set_log_control(control).is_ok());
    }

    /// The broker's log filter in force.
    pub fn log_filter(&self) -> Option<String> {
        self.broker().log_filter()
    }

    /// Reloads certificates and the password file (what SIGHUP does); the errors.
    pub fn reload(&self) -> Vec<String> {
        self.broker().reload()
    }

    /// Reloads the TLS certificates; the errors.
    pub fn reload_certificates(&self) -> Vec<String> {
        let errors = self.broker().reload_certificates();
        errors.iter().map(ToString::to_string).collect()
    }

    fn broker(&self) -> &Broker {
        self.broker.as_ref().expect("broker runs until drop")
    }

    /// Makes reloads read `overrides` (TOML over the test defaults) from `file`, as the binary
    /// reads its config file; `raw` is what the broker is said to have started with.
    pub fn set_config_source(&self, file: std::path::PathBuf) {
        let layers = |text: &str| {
            let mut raw = default_raw()?;
            raw.overlay(parse_raw("test base", BASE)?);
            raw.overlay(parse_raw("test file", text)?);
            Ok::<_, ringmq::config::ConfigError>(raw)
        };
        let text = std::fs::read_to_string(&file).expect("the source file exists");
        let started = layers(&text).expect("the source parses");
        self.broker().set_config_source(
            &started,
            Box::new(move || {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                let raw = layers(&text)?;
                let config = raw.validate()?;
                Ok((raw, config))
            }),
        );
    }

    /// What the operations HTTP server answers admin requests with.
    pub fn admin(&self) -> ringmq::admin::AdminPort {
        self.broker().admin_port()
    }

    /// Each bridge's figures now.
    pub fn bridge_stats(&self) -> Vec<::bridge::BridgeStats> {
        self.broker().bridge_stats()
    }

    pub fn ip_bans_total(&self) -> u64 {
        self.broker().ip_bans_total()
    }

    /// The cluster link's figures now (`None` without `[cluster]`).
    pub fn cluster_figures(&self) -> Option<::cluster::ClusterFigures> {
        self.broker().cluster_figures()
    }

    /// The summed counters now.
    pub fn metrics(&self) -> Snapshot {
        self.broker().metrics().snapshot()
    }

    /// One counter of each shard's block, in shard order.
    fn per_shard(&self, counter: impl Fn(&ShardCounters) -> &AtomicU64) -> Vec<u64> {
        let metrics = self.broker().metrics();
        (0..self.broker().shard_count())
            .map(|i| counter(metrics.shard(i)).load(Ordering::Relaxed))
            .collect()
    }

    /// Bytes received so far by each shard (tells which shard a connection landed on).
    pub fn bytes_received_per_shard(&self) -> Vec<u64> {
        self.per_shard(|c| &c.bytes_received)
    }

    /// A clean-session client and the shard it landed on (the one whose byte count grew while
    /// it connected): call it while no other client sends.
    pub fn connect_on_shard(&self, protocol: ProtocolVersion, id: &str) -> (RawClient, usize) {
        let before = self.bytes_received_per_shard();
        let client = RawClient::connected_clean(self.addr, protocol, id);
        let after = self.bytes_received_per_shard();
        let shard = (0..after.len()).find(|&i| after[i] > before[i]);
        (client, shard.expect("one shard received the CONNECT"))
    }

    /// A clean-session client on `shard` (the kernel spreads connections over the shards'
    /// listeners by address hash, so this reconnects until one lands there), or `None` after
    /// 64 tries elsewhere. Call it while no other client sends.
    pub fn connect_to_shard(
        &self,
        shard: usize,
        protocol: ProtocolVersion,
        id: &str,
    ) -> Option<RawClient> {
        (0..64).find_map(|_| {
            let (client, on) = self.connect_on_shard(protocol, id);
            (on == shard).then_some(client)
        })
    }

    /// Flushes that found another shard's mailbox full, all shards together.
    pub fn mailbox_full_flushes(&self) -> u64 {
        self.broker().mailbox_full_flushes()
    }

    /// Subscriptions in each shard's replica of the table.
    pub fn replica_subscriptions(&self) -> Vec<u64> {
        self.per_shard(|c| &c.replica_subscriptions)
    }

    /// PUBLISH packets held for subscription order, and copies sent to subscriptions applied
    /// after their message was routed, summed over the shards.
    pub fn order_counts(&self) -> (u64, u64) {
        let held = self.per_shard(|c| &c.publishes_held_for_order);
        let owed = self.per_shard(|c| &c.copies_owed_for_order);
        (held.iter().sum(), owed.iter().sum())
    }

    /// Starts a graceful shutdown (clients get DISCONNECT 0x8B); drop joins the shards.
    pub fn stop(&self) {
        self.broker().shutdown();
    }

    /// Fails unless the broker still serves a new client end to end (after a bad one left).
    pub fn assert_serving(&self) {
        let mut client = RawClient::connected_clean(self.addr, V5, "still-serving");
        client.subscribe("alive", QoS::AtLeastOnce);
        client.publish_simple("alive", b"yes", QoS::AtLeastOnce);
        assert_eq!(client.expect_publish_acked().payload(), b"yes");
    }

    /// Polls the counters until `done` holds; fails the test after [`POLL_DEADLINE`].
    pub fn wait_for_metrics(&self, what: &str, done: impl Fn(&Snapshot) -> bool) -> Snapshot {
        wait_until(what, || {
            let snapshot = self.metrics();
            done(&snapshot).then_some(snapshot)
        })
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.as_ref()
            && !std::thread::panicking()
        {
            assert_eq!(
                broker.store_skipped_writes(),
                0,
                "the broker emitted stored writes that do not follow the stored state"
            );
        }
        if let Some(broker) = self.broker.take() {
            broker.shutdown();
            let joined = broker.join();
            if !std::thread::panicking() {
                joined.expect("broker stops cleanly");
            }
        }
    }
}

/// The embedded defaults, the test base and `overrides`, validated.
pub fn test_config(overrides: &str) -> ringmq::config::Config {
    let mut raw = default_raw().expect("embedded defaults parse");
    raw.overlay(parse_raw("test base", BASE).expect("test base parses"));
    raw.overlay(parse_raw("test overrides", overrides).expect("test overrides parse"));
    raw.validate().expect("test config validates")
}

/// Polls `probe` until it returns a value; fails the test after [`POLL_DEADLINE`].
pub fn wait_until<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    wait_until_within(POLL_DEADLINE, what, probe)
}

/// [`wait_until`] with a hang guard of `guard` instead of [`POLL_DEADLINE`].
pub fn wait_until_within<T>(
    guard: Duration,
    what: &str,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + guard;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
