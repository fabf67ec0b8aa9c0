//! `[[webhooks]]`: HTTP endpoints that get broker events as JSON batches (the `webhooks`
//! crate), raw and validated. Defaults live here (an array of tables has no per-entry defaults
//! in `configs/default.toml`); read at start.

use std::time::Duration;

use broker_api::EventKind;
use serde::{Deserialize, Serialize};
use webhooks::WebhookSettings;

use super::error::ConfigError;

/// `[[webhooks]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawWebhook {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_payload: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_max: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_capacity: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_max_ms: Option<u64>,
}

/// Validates every `[[webhooks]]` entry.
pub(super) fn validate(raw: &[RawWebhook]) -> Result<Vec<WebhookSettings>, ConfigError> {
    raw.iter().map(RawWebhook::validate).collect()
}

/// A number of `key` within `range`, or `default` when not given.
fn within(
    key: &'static str,
    value: Option<u64>,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ConfigError> {
    let value = value.unwrap_or(default);
    if range.contains(&value) {
        Ok(value)
    } else {
        let (low, high) = range.into_inner();
        Err(ConfigError::invalid(
            key,
            format!("{value} is out of range {low}..={high}"),
        ))
    }
}

impl RawWebhook {
    fn validate(&self) -> Result<WebhookSettings, ConfigError> {
        let url = (self.url.clone().filter(|u| !u.is_empty()))
            .ok_or_else(|| ConfigError::invalid("webhooks.url", "missing (http:// or https://)"))?;
        let mut settings = WebhookSettings::new(url, self.event_kinds()?);
        settings.topics = self.topics.clone().unwrap_or_default();
        settings.include_payload = self.include_payload.unwrap_or(false);
        let defaults = WebhookSettings::new("", Vec::new());
        let count = |key, value, default: usize, high| {
            within(key, value, default as u64, 1..=high).map(|n| n as usize)
        };
        let millis = |key, value, default: Duration, low, high| {
            within(key, value, default.as_millis() as u64, low..=high).map(Duration::from_millis)
        };
        settings.batch_max = count(
            "webhooks.batch_max",
            self.batch_max,
            defaults.batch_max,
            10_000,
        )?;
        settings.queue_capacity = count(
            "webhooks.queue_capacity",
            self.queue_capacity,
            defaults.queue_capacity,
            10_000_000,
        )?;
        let attempts = within("webhooks.max_attempts", self.max_attempts, 5, 1..=100)?;
        settings.max_attempts = attempts as u32;
        settings.batch_wait = millis(
            "webhooks.batch_wait_ms",
            self.batch_wait_ms,
            defaults.batch_wait,
            0,
            60_000,
        )?;
        settings.timeout = millis(
            "webhooks.timeout_ms",
            self.timeout_ms,
            defaults.timeout,
            10,
            600_000,
        )?;
        settings.backoff = millis(
            "webhooks.backoff_ms",
            self.backoff_ms,
            defaults.backoff,
            1,
            600_000,
        )?;
        settings.backoff_max = millis(
            "webhooks.backoff_max_ms",
            self.backoff_max_ms,
            defaults.backoff_max,
            1,
            3_600_000,
        )?;
        Ok(settings)
    }

    /// The events named, each known.
    fn event_kinds(&self) -> Result<Vec<EventKind>, ConfigError> {
        let names = self.events.clone().unwrap_or_default();
        let known = || EventKind::ALL.map(EventKind::name).join(", ");
        if names.is_empty() {
            return Err(ConfigError::invalid(
                "webhooks.events",
                format!("missing: name at least one of {}", known()),
            ));
        }
        (names.iter())
            .map(|name| {
                EventKind::from_name(name).ok_or_else(|| {
                    ConfigError::invalid(
                        "webhooks.events",
                        format!("{name:?} is not an event: one of {}", known()),
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "webhooks_tests.rs"]
mod tests;
