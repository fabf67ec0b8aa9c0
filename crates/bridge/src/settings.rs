//! `[[bridges]]`' typed settings, one per bridge: what the broker's config layer validates from
//! TOML (defaults, key names and errors stay there) and hands to [`crate::Bridges::start`].

use std::path::PathBuf;
use std::time::Duration;

use broker_api::Secret;
use codec::{ProtocolVersion, QoS};

/// Which way a topic rule carries messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Local messages go to the remote broker.
    Out,
    /// Remote messages come to the local broker.
    In,
    /// Both.
    Both,
}

impl Direction {
    /// Whether local messages go out under this rule.
    pub fn outgoing(self) -> bool {
        matches!(self, Self::Out | Self::Both)
    }

    /// Whether remote messages come in under this rule.
    pub fn incoming(self) -> bool {
        matches!(self, Self::In | Self::Both)
    }
}

/// One validated topic rule: mosquitto's `topic pattern direction qos local_prefix remote_prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRule {
    pub pattern: String,
    pub direction: Direction,
    /// Subscription QoS on the source side (the most a message keeps).
    pub qos: QoS,
    pub local_prefix: String,
    pub remote_prefix: String,
}

/// TLS towards the remote broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeTls {
    /// CA bundle (PEM) the remote's certificate is verified against.
    pub ca_file: PathBuf,
    /// Name checked in the remote's certificate; the address's host when unset.
    pub server_name: Option<String>,
    /// Client certificate and key (PEM), when the remote asks for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// One validated bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeSettings {
    /// Unique; names the bridge in logs, metrics and `$SYS`.
    pub name: String,
    /// `HOST:PORT` of the remote broker, resolved at each connection attempt.
    pub address: String,
    pub client_id: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub protocol: ProtocolVersion,
    pub tls: Option<BridgeTls>,
    pub keep_alive: u16,
    /// Clean Start towards the remote (false: the remote keeps the bridge's session).
    pub clean_start: bool,
    /// 3.1.1 only: announce a bridge (protocol level | 0x80) to the remote.
    pub try_private: bool,
    pub topics: Vec<TopicRule>,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
    /// Unacknowledged QoS 1/2 messages per direction (the Receive Maximum the bridge announces).
    pub max_inflight: u16,
    /// The bridge's client id on the local broker.
    pub local_client_id: String,
    pub local_username: Option<String>,
    pub local_password: Option<Secret>,
}
