//! `[[bridges]]`: connections to other MQTT brokers (mosquitto's `connection` blocks), raw and
//! validated. Defaults live here, not in `configs/default.toml`: an array of tables has no
//! per-entry defaults there.

use std::fmt;
use std::time::Duration;

use codec::{ProtocolVersion, QoS};
use serde::{Deserialize, Serialize};

pub use bridge::settings::{BridgeSettings, BridgeTls, Direction, TopicRule};
pub use broker_api::Secret;

use super::error::ConfigError;
use super::listeners::ListenerSettings;

/// Default `keep_alive`, seconds.
const DEFAULT_KEEP_ALIVE: u64 = 60;
/// Default `reconnect_min_ms` and `reconnect_max_ms`.
const DEFAULT_RECONNECT_MIN_MS: u64 = 1_000;
const DEFAULT_RECONNECT_MAX_MS: u64 = 60_000;
/// Default `max_inflight`: unacknowledged QoS 1/2 messages per direction.
const DEFAULT_MAX_INFLIGHT: u64 = 100;

/// `[[bridges]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawBridge {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_ca_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clean_start: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub try_private: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<RawBridgeTopic>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconnect_min_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconnect_max_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_inflight: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_client_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_password: Option<String>,
}

/// One entry of a bridge's `topics` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawBridgeTopic {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_prefix: Option<String>,
}

/// Validates every bridge; names must be unique, and the local side needs a TCP listener.
pub(super) fn validate(
    raw: &[RawBridge],
    listeners: &ListenerSettings,
) -> Result<Vec<BridgeSettings>, ConfigError> {
    let mut bridges: Vec<BridgeSettings> = Vec::with_capacity(raw.len());
    for entry in raw {
        let bridge = entry.validate()?;
        if bridges.iter().any(|b| b.name == bridge.name) {
            return Err(ConfigError::invalid(
                "bridges.name",
                format!("{:?} names two bridges (names are unique)", bridge.name),
            ));
        }
        bridges.push(bridge);
    }
    if !bridges.is_empty() && listeners.tcp.is_empty() {
        return Err(ConfigError::invalid(
            "bridges",
            "a bridge reaches the local broker over its first TCP listener, and listeners.tcp is empty",
        ));
    }
    Ok(bridges)
}

/// A problem in bridge `name`, under `key`.
fn bad(key: &'static str, name: &str, problem: impl fmt::Display) -> ConfigError {
    ConfigError::invalid(key, format!("bridge {name:?}: {problem}"))
}

/// A non-empty string, or `None` for a missing or empty one.
fn text(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| !v.is_empty())
}

impl RawBridge {
    fn validate(&self) -> Result<BridgeSettings, ConfigError> {
        let name = self.name()?;
        let address = text(&self.address).ok_or_else(|| {
            bad(
                "bridges.address",
                &name,
                "missing (HOST:PORT of the remote)",
            )
        })?;
        check_address(&name, &address)?;
        let client_id =
            text(&self.client_id).ok_or_else(|| bad("bridges.client_id", &name, "missing"))?;
        let reconnect_min = self.reconnect_min_ms.unwrap_or(DEFAULT_RECONNECT_MIN_MS);
        let reconnect_max = self.reconnect_max_ms.unwrap_or(DEFAULT_RECONNECT_MAX_MS);
        if !(10..=3_600_000).contains(&reconnect_min) {
            return Err(bad(
                "bridges.reconnect_min_ms",
                &name,
                format!("{reconnect_min} is out of range 10..=3600000"),
            ));
        }
        if reconnect_max < reconnect_min || reconnect_max > 3_600_000 {
            return Err(bad(
                "bridges.reconnect_max_ms",
                &name,
                format!("{reconnect_max} is below reconnect_min_ms or above 3600000"),
            ));
        }
        Ok(BridgeSettings {
            address,
            username: text(&self.username),
            password: text(&self.password).map(Secret),
            protocol: self.protocol(&name)?,
            tls: self.tls(&name)?,
            keep_alive: bounded(
                &name,
                "bridges.keep_alive",
                self.keep_alive,
                DEFAULT_KEEP_ALIVE,
                5,
            )?,
            clean_start: self.clean_start.unwrap_or(false),
            try_private: self.try_private.unwrap_or(true),
            topics: self.topics(&name)?,
            reconnect_min: Duration::from_millis(reconnect_min),
            reconnect_max: Duration::from_millis(reconnect_max),
            max_inflight: bounded(
                &name,
                "bridges.max_inflight",
                self.max_inflight,
                DEFAULT_MAX_INFLIGHT,
                1,
            )?,
            local_client_id: text(&self.local_client_id)
                .unwrap_or_else(|| format!("ringmq-bridge-{name}")),
            local_username: text(&self.local_username),
            local_password: text(&self.local_password).map(Secret),
            client_id,
            name,
        })
    }

    fn name(&self) -> Result<String, ConfigError> {
        let name = text(&self.name).ok_or_else(|| {
            ConfigError::invalid("bridges.name", "missing (every bridge needs a unique name)")
        })?;
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if !name.chars().all(allowed) {
            return Err(bad(
                "bridges.name",
                &name,
                "use letters, digits, '-', '_' and '.' only (it is a $SYS topic level)",
            ));
        }
        Ok(name)
    }

    fn protocol(&self, name: &str) -> Result<ProtocolVersion, ConfigError> {
        match self.protocol.as_deref().unwrap_or("5.0") {
            "5.0" | "5" => Ok(ProtocolVersion::V5),
            "3.1.1" => Ok(ProtocolVersion::V3_1_1),
            other => Err(bad(
                "bridges.protocol",
                name,
                format!("unknown protocol {other:?} (expected \"5.0\" or \"3.1.1\")"),
            )),
        }
    }

    fn tls(&self, name: &str) -> Result<Option<BridgeTls>, ConfigError> {
        if !self.tls.unwrap_or(false) {
            let set = [&self.tls_ca_file, &self.tls_cert_file, &self.tls_key_file];
            if set.iter().any(|v| text(v).is_some()) {
                return Err(bad(
                    "bridges.tls",
                    name,
                    "tls_* files are set but tls is false",
                ));
            }
            return Ok(None);
        }
        let ca_file = text(&self.tls_ca_file).ok_or_else(|| {
            bad(
                "bridges.tls_ca_file",
                name,
                "required with tls = true (PEM CA bundle)",
            )
        })?;
        let client_cert = match (text(&self.tls_cert_file), text(&self.tls_key_file)) {
            (Some(cert), Some(key)) => Some((cert.into(), key.into())),
            (None, None) => None,
            _ => {
                return Err(bad(
                    "bridges.tls_cert_file",
                    name,
                    "tls_cert_file and tls_key_file go together",
                ));
            }
        };
        Ok(Some(BridgeTls {
            ca_file: ca_file.into(),
            server_name: text(&self.tls_server_name),
            client_cert,
        }))
    }

    fn topics(&self, name: &str) -> Result<Vec<TopicRule>, ConfigError> {
        let raw = self.topics.as_deref().unwrap_or_default();
        if raw.is_empty() {
            return Err(bad(
                "bridges.topics",
                name,
                "at least one topic rule is required",
            ));
        }
        raw.iter().map(|topic| topic.validate(name)).collect()
    }
}

/// A value in `min..=65535`, or its default when unset.
fn bounded(
    name: &str,
    key: &'static str,
    value: Option<u64>,
    default: u64,
    min: u64,
) -> Result<u16, ConfigError> {
    let value = value.unwrap_or(default);
    u16::try_from(value)
        .ok()
        .filter(|v| u64::from(*v) >= min)
        .ok_or_else(|| bad(key, name, format!("{value} is out of range {min}..=65535")))
}

/// `HOST:PORT` with a numeric port; the host is resolved only when connecting. Credentials
/// (`user:password@`) have no place in it (the address is logged): they are refused, unshown.
fn check_address(name: &str, address: &str) -> Result<(), ConfigError> {
    if address.contains('@') {
        return Err(bad(
            "bridges.address",
            name,
            format!(
                "{:?} is not HOST:PORT (credentials go in username and password)",
                broker_api::redact_url(address)
            ),
        ));
    }
    let port = address
        .rsplit_once(':')
        .map(|(host, port)| (host, port.parse::<u16>()));
    match port {
        Some((host, Ok(port))) if !host.is_empty() && port != 0 => Ok(()),
        _ => Err(bad(
            "bridges.address",
            name,
            format!("{address:?} is not HOST:PORT"),
        )),
    }
}

impl RawBridgeTopic {
    fn validate(&self, name: &str) -> Result<TopicRule, ConfigError> {
        let pattern =
            text(&self.pattern).ok_or_else(|| bad("bridges.topics.pattern", name, "missing"))?;
        if pattern.starts_with("$share/")
            || router::TopicFilter::new(&pattern, &router::TopicLimits::default()).is_err()
        {
            return Err(bad(
                "bridges.topics.pattern",
                name,
                format!("{pattern:?} is not a topic filter"),
            ));
        }
        let direction = match self.direction.as_deref() {
            Some("out") => Direction::Out,
            Some("in") => Direction::In,
            Some("both") => Direction::Both,
            other => {
                return Err(bad(
                    "bridges.topics.direction",
                    name,
                    format!("{other:?} is not \"out\", \"in\" or \"both\""),
                ));
            }
        };
        let qos = self.qos.unwrap_or(0);
        let qos = u8::try_from(qos)
            .ok()
            .and_then(QoS::from_u8)
            .ok_or_else(|| {
                bad(
                    "bridges.topics.qos",
                    name,
                    format!("{qos} is not 0, 1 or 2"),
                )
            })?;
        let prefix = |key: &'static str, value: &Option<String>| {
            let value = value.clone().unwrap_or_default();
            if value.contains(['+', '#']) || value.contains('\0') {
                return Err(bad(key, name, format!("{value:?} holds a wildcard")));
            }
            Ok(value)
        };
        Ok(TopicRule {
            local_prefix: prefix("bridges.topics.local_prefix", &self.local_prefix)?,
            remote_prefix: prefix("bridges.topics.remote_prefix", &self.remote_prefix)?,
            pattern,
            direction,
            qos,
        })
    }
}

#[cfg(test)]
#[path = "bridges_tests.rs"]
mod tests;
