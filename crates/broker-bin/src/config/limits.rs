//! `[connection]` and `[limits]`: connection and packet limits; raw, typed and validated.

use std::time::Duration;

use super::error::ConfigError;
use super::fields::{in_range, narrow};
use super::overlay::raw_section;
use crate::settings::{ConnectionSettings, LimitSettings};

raw_section!(
    /// `[connection]`
    RawConnection {
        max_connections: u64,
        connect_timeout: u64,
        max_keep_alive: u64,
        default_keep_alive: u64,
        max_client_id_len: u64,
    }
);
raw_section!(
    /// `[limits]`
    RawLimits {
        max_packet_size: u64,
        receive_maximum: u64,
        max_inflight_outbound: u64,
        topic_alias_maximum: u64,
        outbound_topic_alias_maximum: u64,
        max_topic_length: u64,
        max_topic_levels: u64,
        max_subscriptions_per_client: u64,
        max_connect_size: u64,
        max_partial_frame_bytes: u64,
        return_memory_after_bytes: u64,
        free_memory_hold_ms: u64,
        max_publish_rate: u64,
        max_publish_bytes_rate: u64,
    }
);

/// Smallest maximum packet size that still fits a CONNECT with a short client id.
const MIN_PACKET_SIZE: u64 = 64;
/// The MQTT wire limit of a packet: 1 type byte, 4 length bytes and 268,435,455 remaining bytes.
const MAX_PACKET_SIZE: u64 = 268_435_460;
/// The MQTT limit of a UTF-8 string (topic, client id).
const MAX_STRING: u64 = 65_535;

/// A keep-alive style value where 0 means "none".
fn optional_u16(key: &'static str, v: &Option<u64>) -> Result<Option<u16>, ConfigError> {
    let value: u16 = narrow(key, v, 0, u64::from(u16::MAX))?;
    Ok((value != 0).then_some(value))
}

impl RawConnection {
    pub(super) fn validate(&self) -> Result<ConnectionSettings, ConfigError> {
        Ok(ConnectionSettings {
            max_connections: narrow(
                "connection.max_connections",
                &self.max_connections,
                1,
                10_000_000,
            )?,
            connect_timeout: Duration::from_secs(in_range(
                "connection.connect_timeout",
                &self.connect_timeout,
                1,
                3600,
            )?),
            max_keep_alive: optional_u16("connection.max_keep_alive", &self.max_keep_alive)?,
            default_keep_alive: optional_u16(
                "connection.default_keep_alive",
                &self.default_keep_alive,
            )?,
            max_client_id_len: narrow(
                "connection.max_client_id_len",
                &self.max_client_id_len,
                23,
                MAX_STRING,
            )?,
        })
    }
}

impl RawLimits {
    pub(super) fn validate(&self) -> Result<LimitSettings, ConfigError> {
        let limits = self.limit_values()?;
        if limits.max_partial_frame_bytes < u64::from(limits.max_packet_size) {
            return Err(ConfigError::invalid(
                "limits.max_partial_frame_bytes",
                format!(
                    "{} is below limits.max_packet_size ({}): a largest packet could never arrive",
                    limits.max_partial_frame_bytes, limits.max_packet_size
                ),
            ));
        }
        Ok(limits)
    }

    fn limit_values(&self) -> Result<LimitSettings, ConfigError> {
        let u16_max = u64::from(u16::MAX);
        Ok(LimitSettings {
            max_packet_size: narrow(
                "limits.max_packet_size",
                &self.max_packet_size,
                MIN_PACKET_SIZE,
                MAX_PACKET_SIZE.min(u64::from(u32::MAX)),
            )?,
            receive_maximum: narrow("limits.receive_maximum", &self.receive_maximum, 1, u16_max)?,
            max_inflight_outbound: narrow(
                "limits.max_inflight_outbound",
                &self.max_inflight_outbound,
                1,
                u16_max,
            )?,
            topic_alias_maximum: narrow(
                "limits.topic_alias_maximum",
                &self.topic_alias_maximum,
                0,
                u16_max,
            )?,
            outbound_topic_alias_maximum: narrow(
                "limits.outbound_topic_alias_maximum",
                &self.outbound_topic_alias_maximum,
                0,
                u16_max,
            )?,
            max_topic_length: narrow(
                "limits.max_topic_length",
                &self.max_topic_length,
                1,
                MAX_STRING,
            )?,
            max_topic_levels: narrow(
                "limits.max_topic_levels",
                &self.max_topic_levels,
                1,
                u16_max,
            )?,
            max_subscriptions_per_client: narrow(
                "limits.max_subscriptions_per_client",
                &self.max_subscriptions_per_client,
                1,
                1_000_000,
            )?,
            max_connect_size: narrow(
                "limits.max_connect_size",
                &self.max_connect_size,
                MIN_PACKET_SIZE,
                MAX_PACKET_SIZE.min(u64::from(u32::MAX)),
            )?,
            max_partial_frame_bytes: in_range(
                "limits.max_partial_frame_bytes",
                &self.max_partial_frame_bytes,
                MIN_PACKET_SIZE,
                1 << 40,
            )?,
            return_memory_after_bytes: in_range(
                "limits.return_memory_after_bytes",
                &self.return_memory_after_bytes,
                0,
                1 << 40,
            )?,
            free_memory_hold: Duration::from_millis(in_range(
                "limits.free_memory_hold_ms",
                &self.free_memory_hold_ms,
                0,
                60_000,
            )?),
        })
    }
}
