//! Command line of `ringmq-bench`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::phase::PhaseMode;

/// ringmq-bench: an MQTT load generator on RingMQ's thread-per-core runtime.
#[derive(Debug, Parser)]
#[command(name = "ringmq-bench", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// What to run.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Connect idle clients and hold them.
    Conn {
        #[command(flatten)]
        common: Common,
        /// Number of clients.
        #[arg(long, short = 'c', default_value_t = 1000)]
        count: usize,
    },
    /// Publishers only.
    Pub {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        publish: PublishArgs,
        /// Number of publishers.
        #[arg(long, short = 'c', default_value_t = 1)]
        count: usize,
        /// Topic pattern; `%i` is the client index, `%c` the client id.
        #[arg(long, short = 't', default_value = "bench/%i")]
        topic: String,
    },
    /// Subscribers only.
    Sub {
        #[command(flatten)]
        common: Common,
        /// Number of subscribers.
        #[arg(long, short = 'c', default_value_t = 1)]
        count: usize,
        /// Topic filter pattern; `%i` is the client index, `%c` the client id.
        #[arg(long, short = 't', default_value = "bench/#")]
        topic: String,
        /// Subscription QoS.
        #[arg(long, short = 'q', default_value_t = 0)]
        qos: u8,
        /// Messages expected in total (for the loss figure); 0 = unknown.
        #[arg(long, default_value_t = 0)]
        expect: u64,
    },
    /// Broadcast: every publisher publishes to one topic that every subscriber subscribes to.
    Fanout {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        publish: PublishArgs,
        /// Publishers.
        #[arg(long, default_value_t = 10)]
        pubs: usize,
        /// Subscribers.
        #[arg(long, default_value_t = 500)]
        subs: usize,
        /// The topic.
        #[arg(long, short = 't', default_value = "bench/fanout")]
        topic: String,
    },
    /// One-to-one: each publisher has its own topic and its own subscriber.
    P2p {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        publish: PublishArgs,
        /// Publisher/subscriber pairs.
        #[arg(long, default_value_t = 1000)]
        pairs: usize,
        /// Topic prefix; pair `i` uses `PREFIX/i`.
        #[arg(long, default_value = "bench/p2p")]
        prefix: String,
    },
    /// Shared subscription: publishers to one topic, members of `$share/GROUP/TOPIC`.
    Shared {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        publish: PublishArgs,
        /// Publishers.
        #[arg(long, default_value_t = 20)]
        pubs: usize,
        /// Group members.
        #[arg(long, default_value_t = 50)]
        members: usize,
        /// The topic.
        #[arg(long, short = 't', default_value = "bench/shared")]
        topic: String,
        /// The share group name.
        #[arg(long, default_value = "g")]
        group: String,
    },
    /// Latency probe: one client publishing to a topic it subscribes to, at a fixed interval.
    Latency {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        probe: ProbeArgs,
    },
    /// Persistent sessions: subscribe, go offline, messages published to each, reconnect and
    /// count exactly-once delivery and the drain time.
    Offline {
        #[command(flatten)]
        common: Common,
        #[command(flatten)]
        offline: OfflineArgs,
    },
}

/// Latency probe options.
#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// Samples (messages) to send.
    #[arg(long, default_value_t = 2000)]
    pub samples: u64,
    /// Milliseconds between samples.
    #[arg(long, default_value_t = 10)]
    pub interval_ms: u64,
    /// QoS of the probe's publishes and subscription.
    #[arg(long, short = 'q', default_value_t = 0)]
    pub qos: u8,
    /// Payload size in bytes (at least 16).
    #[arg(long, short = 's', default_value_t = 16)]
    pub size: usize,
    /// Topic pattern (`%c` is the client id).
    #[arg(long, short = 't', default_value = "bench/probe/%c")]
    pub topic: String,
    /// Seconds to wait after the SUBACK before the first sample.
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,
}

/// Offline (persistent session) runner options.
#[derive(Debug, Clone, Args)]
pub struct OfflineArgs {
    /// Persistent sessions (each subscribes to its own topic).
    #[arg(long, default_value_t = 1000)]
    pub sessions: usize,
    /// Messages published to each session's topic while it is offline.
    #[arg(long, short = 'm', default_value_t = 100)]
    pub messages: u64,
    /// QoS of the subscriptions and publishes (1 or 2).
    #[arg(long, short = 'q', default_value_t = 1)]
    pub qos: u8,
    /// Payload size in bytes (at least 16).
    #[arg(long, short = 's', default_value_t = 16)]
    pub size: usize,
    /// Unacknowledged messages per publisher.
    #[arg(long, default_value_t = 64)]
    pub inflight: u16,
    /// Topic prefix; session `i` subscribes to `PREFIX/i`.
    #[arg(long, default_value = "bench/offline")]
    pub prefix: String,
}

/// Options every command takes.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// Broker address; repeatable (clients are spread over them).
    #[arg(long, short = 'H', default_value = "127.0.0.1:1883")]
    pub host: Vec<SocketAddr>,
    /// Local source address; repeatable (to go beyond one address's ephemeral ports).
    #[arg(long)]
    pub bind: Vec<IpAddr>,
    /// Load generator threads (0 = one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Pin load generator thread `i` to core `i`. Off by default: several load generator
    /// processes of one thread each would all sit on core 0, beside the broker's first shard,
    /// while the scheduler could have spread them over idle cores.
    #[arg(long)]
    pub pin: bool,
    /// Scheduler slice the load generator's threads ask for, in microseconds (100..=100000;
    /// Linux 6.12+; 0 = the kernel's default). A latency probe with a short slice is not held
    /// back behind other threads on its core when the broker's answer wakes it.
    #[arg(long, default_value_t = 0, value_parser = parse_slice)]
    pub sched_slice_us: u64,
    /// MQTT protocol version: 3 (3.1), 4 (3.1.1) or 5 (5.0).
    #[arg(long = "mqtt", short = 'V', default_value_t = 4)]
    pub mqtt_version: u8,
    /// Keep-alive in seconds.
    #[arg(long, default_value_t = 300)]
    pub keep_alive: u16,
    /// Connect with Clean Start = 0 (persistent sessions; session expiry 0xFFFFFFFF in 5.0).
    #[arg(long)]
    pub persistent: bool,
    /// User name every client sends in CONNECT.
    #[arg(long)]
    pub username: Option<String>,
    /// Password every client sends in CONNECT (with --username).
    #[arg(long, requires = "username")]
    pub password: Option<String>,
    /// New connections per second over all clients (0 = as fast as possible).
    #[arg(long, default_value_t = 0)]
    pub connect_rate: u64,
    /// Run time in seconds (the run also ends when every publisher reached --limit and every
    /// expected message arrived).
    #[arg(long, short = 'd', default_value_t = 10)]
    pub duration: u64,
    /// Client id prefix.
    #[arg(long, default_value = "rb")]
    pub client_prefix: String,
    /// Write the summary as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Scenario label written into the summary.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Print no progress lines.
    #[arg(long)]
    pub quiet: bool,
    /// End the run this many seconds after every client is ready (connected and subscribed),
    /// instead of at --duration (which still bounds it).
    #[arg(long)]
    pub hold: Option<u64>,
    #[command(flatten)]
    pub transport: TransportArgs,
}

/// How clients reach the broker: plain TCP unless asked otherwise.
#[derive(Debug, Clone, Default, Args)]
pub struct TransportArgs {
    /// TLS to every host, trusting the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// The name the server certificate must carry (default: the host's IP address).
    #[arg(long, value_name = "NAME", requires = "tls_ca")]
    pub tls_server_name: Option<String>,
    /// MQTT over WebSocket at this path (e.g. `/mqtt`); with --tls-ca, secure WebSocket.
    #[arg(long, value_name = "PATH")]
    pub ws: Option<String>,
    /// MQTT over QUIC (UDP; TLS 1.3, ALPN `mqtt`, MQTT on one bidirectional stream): every
    /// --host is a broker's QUIC listener (`[[listeners.quic]]`). Needs --tls-ca; each thread
    /// sends from a UDP port of its own (so --bind does not apply).
    #[arg(long, requires = "tls_ca", conflicts_with_all = ["ws", "bind"])]
    pub quic: bool,
}

impl TransportArgs {
    /// The `transport` crate's client settings for these flags.
    pub fn client_settings(&self) -> transport::ClientSettings {
        transport::ClientSettings {
            tls_ca: self.tls_ca.clone(),
            tls_server_name: self.tls_server_name.clone(),
            ws: self.ws.clone(),
        }
    }
}

/// Publishing options.
#[derive(Debug, Clone, Args)]
pub struct PublishArgs {
    /// QoS of publishes and subscriptions.
    #[arg(long, short = 'q', default_value_t = 0)]
    pub qos: u8,
    /// Payload size in bytes (at least 16: timestamp, publisher and sequence).
    #[arg(long, short = 's', default_value_t = 256)]
    pub size: usize,
    /// Messages per second per publisher, fractions allowed (0 = flood, bounded by the inflight
    /// window and the socket queue).
    #[arg(long, short = 'r', default_value_t = 0.0)]
    pub rate: f64,
    /// Messages per publisher (0 = until the duration ends).
    #[arg(long, short = 'L', default_value_t = 0)]
    pub limit: u64,
    /// Unacknowledged QoS 1/2 messages per publisher.
    #[arg(long, default_value_t = 64)]
    pub inflight: u16,
    /// Seconds to wait after connecting before publishing (lets subscriptions settle).
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,
    /// Where a rate-limited publisher's sends fall within its period: `spread` (a fixed offset
    /// per publisher index, the same load for every broker) or `connack` (one warm-up after its
    /// own CONNACK: a broker that acknowledges quickly gets its publishers' messages in bursts).
    #[arg(long, value_enum, default_value_t = PhaseMode::Spread)]
    pub phase: PhaseMode,
}

/// `--sched-slice-us`: 0, or within the kernel's range for a custom slice.
fn parse_slice(text: &str) -> Result<u64, String> {
    let micros: u64 = text.parse().map_err(|e| format!("{e}"))?;
    match micros {
        0 | 100..=100_000 => Ok(micros),
        _ => Err(format!(
            "{micros} is outside 100..=100000 (or 0 for the kernel's default)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_is_zero_or_in_the_kernels_range() {
        assert_eq!(parse_slice("0"), Ok(0));
        assert_eq!(parse_slice("100"), Ok(100));
        assert_eq!(parse_slice("100000"), Ok(100_000));
        for bad in ["1", "99", "100001", "-5", "fast"] {
            assert!(parse_slice(bad).is_err(), "{bad}");
        }
    }
}
