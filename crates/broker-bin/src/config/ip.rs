//! `[ip]`: address lists and per-address limits, validated into [`IpSettings`].

use std::time::Duration;

use super::error::ConfigError;
use super::overlay::raw_section;
use crate::guard::{Cidr, IpSettings};

raw_section!(
    /// `[ip]`
    RawIp {
        allow: Vec<String>,
        deny: Vec<String>,
        exempt: Vec<String>,
        max_connections: u64,
        max_connect_rate: u64,
        ban_after_auth_failures: u64,
        ban_user_after_auth_failures: u64,
        auth_failure_window: u64,
        ban_duration: u64,
        max_tracked: u64,
    }
);

impl RawIp {
    pub(super) fn validate(&self) -> Result<IpSettings, ConfigError> {
        let blocks = |key: &'static str, list: &Option<Vec<String>>| {
            list.iter()
                .flatten()
                .map(|text| {
                    text.parse::<Cidr>()
                        .map_err(|e| ConfigError::invalid(key, e.to_string()))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let number =
            |key: &'static str, value: &Option<u64>, max: u64| -> Result<u64, ConfigError> {
                let value =
                    value.ok_or_else(|| ConfigError::invalid(key, "missing (and no default)"))?;
                if value > max {
                    return Err(ConfigError::invalid(
                        key,
                        format!("{value} is out of range 0..={max}"),
                    ));
                }
                Ok(value)
            };
        let seconds = |key, value| number(key, value, 86_400 * 365).map(Duration::from_secs);
        Ok(IpSettings {
            allow: blocks("ip.allow", &self.allow)?,
            deny: blocks("ip.deny", &self.deny)?,
            exempt: blocks("ip.exempt", &self.exempt)?,
            max_connections: number(
                "ip.max_connections",
                &self.max_connections,
                u64::from(u32::MAX),
            )? as u32,
            max_connect_rate: number("ip.max_connect_rate", &self.max_connect_rate, 1_000_000)?
                as u32,
            ban_after_auth_failures: number(
                "ip.ban_after_auth_failures",
                &self.ban_after_auth_failures,
                1_000_000,
            )? as u32,
            ban_user_after_auth_failures: number(
                "ip.ban_user_after_auth_failures",
                &self.ban_user_after_auth_failures,
                1_000_000,
            )? as u32,
            auth_failure_window: seconds("ip.auth_failure_window", &self.auth_failure_window)?,
            ban_duration: seconds("ip.ban_duration", &self.ban_duration)?,
            max_tracked: number("ip.max_tracked", &self.max_tracked, 100_000_000)?.max(1) as usize,
        })
    }
}
