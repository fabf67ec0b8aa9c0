//! `[[rewrite]]`: topic rewrite rules (EMQX's `rewrite`), raw and validated into the router's
//! [`TopicRewrite`]. Read at start.

use router::{RewriteAction, RewriteRule, TopicRewrite};
use serde::{Deserialize, Serialize};

use super::error::ConfigError;

/// `[[rewrite]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRewrite {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_topic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub re: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dest_topic: Option<String>,
}

/// Validates every `[[rewrite]]` rule, in order.
pub(super) fn validate(raw: &[RawRewrite]) -> Result<TopicRewrite, ConfigError> {
    let rules = raw
        .iter()
        .map(RawRewrite::validate)
        .collect::<Result<_, _>>()?;
    Ok(TopicRewrite::new(rules))
}

impl RawRewrite {
    fn validate(&self) -> Result<RewriteRule, ConfigError> {
        let action = match self.action.as_deref().unwrap_or("all") {
            "all" => RewriteAction::All,
            "publish" => RewriteAction::Publish,
            "subscribe" => RewriteAction::Subscribe,
            other => {
                return Err(ConfigError::invalid(
                    "rewrite.action",
                    format!("{other:?} (expected \"all\", \"publish\" or \"subscribe\")"),
                ));
            }
        };
        let need = |key: &'static str, value: &Option<String>| {
            value
                .clone()
                .ok_or_else(|| ConfigError::invalid(key, "missing"))
        };
        let source = need("rewrite.source_topic", &self.source_topic)?;
        let re = need("rewrite.re", &self.re)?;
        let dest = need("rewrite.dest_topic", &self.dest_topic)?;
        RewriteRule::new(action, &source, &re, &dest).map_err(|e| {
            let key = match e {
                router::RewriteError::Source(..) => "rewrite.source_topic",
                router::RewriteError::Pattern(..) => "rewrite.re",
                _ => "rewrite.dest_topic",
            };
            ConfigError::invalid(key, e.to_string())
        })
    }
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;
