//! `[cluster]`: joining a RingMQ cluster over NATS (see docs/cluster.md). Absent: one node.

pub use cluster::settings::{ClusterSettings, NatsSecurity};

use broker_api::redact_url;

use super::error::ConfigError;
use super::overlay::raw_section;

raw_section!(
    /// `[cluster]`: present only on a node of a cluster.
    RawCluster {
        node_id: String,
        nats: Vec<String>,
        max_outbound_messages: u64,
        subject_prefix: String,
        replicas: u64,
        node_timeout_ms: u64,
        replay_window_ms: u64,
        replay_max_bytes: u64,
        ack_timeout_ms: u64,
        ack_while_disconnected: bool,
        admit_unchecked_sessions: bool,
        qos2_journal: bool,
        qos2_journal_wait_ms: u64,
        tls_ca_file: String,
        tls_cert_file: String,
        tls_key_file: String,
        creds_file: String,
    }
);

/// Messages waiting for the NATS link when `cluster.max_outbound_messages` is not set.
pub const DEFAULT_MAX_OUTBOUND: u64 = 65_536;
/// The first subject tokens when `cluster.subject_prefix` is not set.
pub const DEFAULT_SUBJECT_PREFIX: &str = "ringmq";
/// How long QoS 1/2 messages are kept for replays when `cluster.replay_window_ms` is not set.
pub const DEFAULT_REPLAY_WINDOW_MS: u64 = 60_000;
/// The most bytes kept for replays when `cluster.replay_max_bytes` is not set.
pub const DEFAULT_REPLAY_MAX_BYTES: u64 = 64 << 20;
/// The longest node id.
const MAX_NODE_ID: usize = 64;

/// Validates `[cluster]`.
pub(super) fn validate(raw: &RawCluster) -> Result<ClusterSettings, ConfigError> {
    let node_id = raw
        .node_id
        .clone()
        .ok_or_else(|| ConfigError::invalid("cluster.node_id", "missing: every node needs one"))?;
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if node_id.is_empty() || node_id.len() > MAX_NODE_ID || !node_id.chars().all(valid) {
        return Err(ConfigError::invalid(
            "cluster.node_id",
            format!("`{node_id}`: 1 to {MAX_NODE_ID} letters, digits, `-` or `_`"),
        ));
    }
    Ok(ClusterSettings {
        node_id,
        nats: servers(raw.nats.as_deref().unwrap_or_default())?,
        max_outbound_messages: outbound_bound(raw.max_outbound_messages)?,
        subject_prefix: prefix(raw.subject_prefix.as_deref())?,
        replicas: replicas(raw.replicas)?,
        node_timeout: node_timeout(raw.node_timeout_ms)?,
        replay_window: replay_window(raw.replay_window_ms)?,
        replay_max_bytes: replay_max_bytes(raw.replay_max_bytes)?,
        ack_timeout: ack_timeout(raw.ack_timeout_ms)?,
        ack_while_disconnected: raw.ack_while_disconnected.unwrap_or(false),
        admit_unchecked_sessions: raw.admit_unchecked_sessions.unwrap_or(false),
        qos2_journal: raw.qos2_journal.unwrap_or(true),
        qos2_journal_wait: journal_wait(raw.qos2_journal_wait_ms)?,
        security: security(raw)?,
    })
}

/// `cluster.nats`: at least one server, each a URL the NATS client accepts.
fn servers(list: &[String]) -> Result<Vec<String>, ConfigError> {
    if list.is_empty() {
        return Err(ConfigError::invalid(
            "cluster.nats",
            "empty: name at least one NATS server, e.g. \"nats://127.0.0.1:4222\"",
        ));
    }
    for url in list {
        cluster::settings::check_server_url(url).map_err(|e| {
            ConfigError::invalid(
                "cluster.nats",
                format!("`{}` is not a NATS URL: {e}", redact_url(url)),
            )
        })?;
    }
    Ok(list.to_vec())
}

/// `cluster.max_outbound_messages`: 1 to 10,000,000.
fn outbound_bound(value: Option<u64>) -> Result<usize, ConfigError> {
    let value = value.unwrap_or(DEFAULT_MAX_OUTBOUND);
    if !(1..=10_000_000).contains(&value) {
        return Err(ConfigError::invalid(
            "cluster.max_outbound_messages",
            format!("{value} is out of range 1..=10000000"),
        ));
    }
    Ok(value as usize)
}

/// `cluster.replicas`: 1 to 5 (JetStream's own bound; at most the NATS servers).
fn replicas(value: Option<u64>) -> Result<usize, ConfigError> {
    let value = value.unwrap_or(1);
    if !(1..=5).contains(&value) {
        return Err(ConfigError::invalid(
            "cluster.replicas",
            format!("{value} is out of range 1..=5"),
        ));
    }
    Ok(value as usize)
}

/// The TLS and credentials keys: every file named must be readable now; a client certificate
/// needs its key.
fn security(raw: &RawCluster) -> Result<NatsSecurity, ConfigError> {
    let readable = |key: &'static str, path: &Option<String>| match path {
        None => Ok(None),
        Some(path) => match std::fs::File::open(path) {
            Ok(_) => Ok(Some(std::path::PathBuf::from(path))),
            Err(e) => Err(ConfigError::invalid(key, format!("`{path}`: {e}"))),
        },
    };
    let cert = readable("cluster.tls_cert_file", &raw.tls_cert_file)?;
    let key = readable("cluster.tls_key_file", &raw.tls_key_file)?;
    let tls_client = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => {
            let why = "set both cluster.tls_cert_file and cluster.tls_key_file, or neither";
            return Err(ConfigError::invalid("cluster.tls_cert_file", why));
        }
    };
    Ok(NatsSecurity {
        tls_ca_file: readable("cluster.tls_ca_file", &raw.tls_ca_file)?,
        tls_client,
        creds_file: readable("cluster.creds_file", &raw.creds_file)?,
    })
}

/// `cluster.node_timeout_ms`: 1,000 to 600,000 (10,000 when not set).
fn node_timeout(value: Option<u64>) -> Result<std::time::Duration, ConfigError> {
    let value = value.unwrap_or(10_000);
    if !(1_000..=600_000).contains(&value) {
        return Err(ConfigError::invalid(
            "cluster.node_timeout_ms",
            format!("{value} is out of range 1000..=600000"),
        ));
    }
    Ok(std::time::Duration::from_millis(value))
}

/// How long a publisher's acknowledgement waits for JetStream when `cluster.ack_timeout_ms`
/// is not set: a JetStream leader election and a NATS reconnect (a few seconds each) fit,
/// well under the 20 to 60 s MQTT clients commonly wait for a PUBACK.
pub const DEFAULT_ACK_TIMEOUT_MS: u64 = 10_000;

/// `cluster.ack_timeout_ms`: 1,000 to 120,000 (10,000 when not set).
fn ack_timeout(value: Option<u64>) -> Result<std::time::Duration, ConfigError> {
    let value = value.unwrap_or(DEFAULT_ACK_TIMEOUT_MS);
    if !(1_000..=120_000).contains(&value) {
        return Err(ConfigError::invalid(
            "cluster.ack_timeout_ms",
            format!("{value} is out of range 1000..=120000"),
        ));
    }
    Ok(std::time::Duration::from_millis(value))
}

/// `cluster.qos2_journal_wait_ms`: 0 (until written, the default) or 1,000 to 120,000.
fn journal_wait(value: Option<u64>) -> Result<Option<std::time::Duration>, ConfigError> {
    match value.unwrap_or(0) {
        0 => Ok(None),
        ms @ 1_000..=120_000 => Ok(Some(std::time::Duration::from_millis(ms))),
        ms => Err(ConfigError::invalid(
            "cluster.qos2_journal_wait_ms",
            format!("{ms} is out of range: 0 (until written) or 1000..=120000"),
        )),
    }
}

/// `cluster.replay_window_ms`: 0 (off) or 1,000 to 86,400,000 (60,000 when not set).
fn replay_window(value: Option<u64>) -> Result<Option<std::time::Duration>, ConfigError> {
    match value.unwrap_or(DEFAULT_REPLAY_WINDOW_MS) {
        0 => Ok(None),
        ms @ 1_000..=86_400_000 => Ok(Some(std::time::Duration::from_millis(ms))),
        ms => Err(ConfigError::invalid(
            "cluster.replay_window_ms",
            format!("{ms} is out of range: 0 (off) or 1000..=86400000"),
        )),
    }
}

/// `cluster.replay_max_bytes`: 1 MiB to 1 TiB (64 MiB when not set).
fn replay_max_bytes(value: Option<u64>) -> Result<u64, ConfigError> {
    let value = value.unwrap_or(DEFAULT_REPLAY_MAX_BYTES);
    if !(1 << 20..=1 << 40).contains(&value) {
        return Err(ConfigError::invalid(
            "cluster.replay_max_bytes",
            format!("{value} is out of range 1048576..=1099511627776"),
        ));
    }
    Ok(value)
}

/// `cluster.subject_prefix`: NATS tokens joined by `.`, none empty, no wildcard, whitespace or
/// `%`.
fn prefix(value: Option<&str>) -> Result<String, ConfigError> {
    let prefix = value.unwrap_or(DEFAULT_SUBJECT_PREFIX);
    let bad_char = |c: char| matches!(c, '*' | '>' | '%') || c.is_whitespace() || c.is_control();
    if prefix.split('.').any(str::is_empty) || prefix.chars().any(bad_char) {
        return Err(ConfigError::invalid(
            "cluster.subject_prefix",
            format!(
                "`{prefix}`: NATS tokens joined by `.`, none empty, without `*`, `>`, `%` or \
                 whitespace"
            ),
        ));
    }
    Ok(prefix.to_owned())
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;
