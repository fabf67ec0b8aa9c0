//! `[[auto_subscribe]]`: filters every session is subscribed to when its client connects
//! (EMQX's auto subscribe; `%c` the client id, `%u` the username), raw and validated. Read at
//! start.

use codec::{QoS, RetainHandling, SubscriptionOptions};
use router::{SubscriptionFilter, TopicLimits};
use serde::{Deserialize, Serialize};

use super::error::ConfigError;
use crate::settings::AutoSubscription;

/// `[[auto_subscribe]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAutoSubscribe {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_local: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retain_as_published: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retain_handling: Option<u8>,
}

/// Validates every `[[auto_subscribe]]` entry.
pub(super) fn validate(raw: &[RawAutoSubscribe]) -> Result<Vec<AutoSubscription>, ConfigError> {
    raw.iter().map(RawAutoSubscribe::validate).collect()
}

impl RawAutoSubscribe {
    fn validate(&self) -> Result<AutoSubscription, ConfigError> {
        let filter = (self.filter.clone().filter(|f| !f.is_empty()))
            .ok_or_else(|| ConfigError::invalid("auto_subscribe.filter", "missing"))?;
        // Checked with a client id and a username standing in for %c and %u.
        let sample = filter.replace("%c", "c").replace("%u", "u");
        let bytes = bytes::Bytes::from(sample.into_bytes());
        if SubscriptionFilter::from_bytes(bytes, &TopicLimits::default()).is_err() {
            let problem = format!("{filter:?} is not a valid topic filter");
            return Err(ConfigError::invalid("auto_subscribe.filter", problem));
        }
        let qos = match self.qos.unwrap_or(0) {
            0 => QoS::AtMostOnce,
            1 => QoS::AtLeastOnce,
            2 => QoS::ExactlyOnce,
            other => {
                let problem = format!("{other} (expected 0, 1 or 2)");
                return Err(ConfigError::invalid("auto_subscribe.qos", problem));
            }
        };
        let retain_handling = match self.retain_handling.unwrap_or(0) {
            0 => RetainHandling::SendAtSubscribe,
            1 => RetainHandling::SendIfNew,
            2 => RetainHandling::DoNotSend,
            other => {
                let problem = format!("{other} (expected 0, 1 or 2)");
                return Err(ConfigError::invalid(
                    "auto_subscribe.retain_handling",
                    problem,
                ));
            }
        };
        let no_local = self.no_local.unwrap_or(false);
        if no_local && filter.starts_with(router::SHARE_PREFIX) {
            let problem = "no_local on a shared subscription is a protocol error (MQTT 3.8.3.1)";
            return Err(ConfigError::invalid("auto_subscribe.no_local", problem));
        }
        let options = SubscriptionOptions {
            qos,
            no_local,
            retain_as_published: self.retain_as_published.unwrap_or(false),
            retain_handling,
        };
        Ok(AutoSubscription { filter, options })
    }
}
