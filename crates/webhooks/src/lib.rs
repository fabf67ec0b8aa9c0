//! Webhooks: broker events (connections, subscriptions, accepted publishes, dropped copies)
//! POSTed as JSON batches to HTTP endpoints, from side threads, never from a reactor.
//!
//! The shards hand events to the [`broker_api::EventHook`] that [`Webhooks`] implements: one
//! `try_send` into each interested webhook's bounded queue (a full queue drops the event and
//! counts it). Each webhook's thread gathers batches and POSTs them, retrying with a doubling
//! backoff; a batch that never gets a 2xx answer is given up and counted. Read at start.
//!
//! - `settings.rs`: [`WebhookSettings`]; `error.rs`: [`WebhookError`].
//! - `hook.rs`: [`Webhooks`], the hook and the webhooks' threads.
//! - `sender.rs`: one webhook's thread; `json.rs`: the body it POSTs.
//! - `counters.rs`: what became of the events (read as `broker_api::EventHookFigures`, for
//!   `/metrics`).

#![forbid(unsafe_code)]

mod counters;
mod error;
mod hook;
mod json;
mod sender;
mod settings;
#[cfg(test)]
mod tests;

pub use counters::WebhookCounters;
pub use error::WebhookError;
pub use hook::Webhooks;
pub use settings::WebhookSettings;
