//! [`Webhooks`]: the broker's [`EventHook`] when `[[webhooks]]` are configured. Each webhook
//! has a bounded queue and a thread (`sender.rs`); posting an event is a `try_send` per
//! webhook that wants it, never a wait: a full queue drops the event and counts it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use broker_api::{BrokerEvent, EventHook, EventHookFigures, EventKind, redact_url};
use crossbeam_channel::{Sender as QueueSender, TrySendError, bounded};
use router::{FilterMatcher, TopicFilter, TopicLimits};

use crate::counters::WebhookCounters;
use crate::error::WebhookError;
use crate::json::Stamped;
use crate::sender::Sender;
use crate::settings::WebhookSettings;

/// One running webhook.
struct Webhook {
    url: String,
    /// The kinds of events it wants, one bit per kind (asked once per event, so no list walk).
    kinds: u8,
    /// The topics of the `message.published` events it wants (all when empty).
    topics: Vec<FilterMatcher>,
    queue: Option<QueueSender<Stamped>>,
    counters: Arc<WebhookCounters>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Every configured webhook.
pub struct Webhooks {
    hooks: Vec<Webhook>,
}

impl Webhooks {
    /// Checks each webhook's settings and starts its thread.
    pub fn start(settings: Vec<WebhookSettings>) -> Result<Self, WebhookError> {
        let hooks = settings
            .into_iter()
            .map(Webhook::start)
            .collect::<Result<_, _>>()?;
        Ok(Self { hooks })
    }
}

impl Webhook {
    fn start(settings: WebhookSettings) -> Result<Self, WebhookError> {
        check(&settings)?;
        let topics = topic_filters(&settings)?;
        let (queue, incoming) = bounded(settings.queue_capacity);
        let counters = Arc::new(WebhookCounters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let sender = Sender::new(settings.clone(), incoming, counters.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("ringmq-webhook".into())
            .spawn(move || sender.run())
            .map_err(|e| WebhookError::Thread {
                url: redact_url(&settings.url).into_owned(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            url: settings.url,
            kinds: settings
                .events
                .iter()
                .fold(0, |bits, kind| bits | kind_bit(*kind)),
            topics,
            queue: Some(queue),
            counters,
            stop,
            thread: Some(thread),
        })
    }

    fn wants(&self, kind: EventKind) -> bool {
        self.kinds & kind_bit(kind) != 0
    }

    fn wants_topic(&self, topic: &[u8]) -> bool {
        if !self.wants(EventKind::MessagePublished) {
            return false;
        }
        // Once per accepted PUBLISH while a webhook wants them: the topic is valid already, so
        // its bytes are matched as they are (no parse, no UTF-8 check, no allocation), each
        // filter's literal start first.
        self.topics.is_empty() || self.topics.iter().any(|filter| filter.matches_bytes(topic))
    }

    fn post(&self, stamped: Stamped) {
        let Some(queue) = &self.queue else {
            return;
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = queue.try_send(stamped)
        {
            self.counters.overflowed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Webhook {
    /// Closes the queue and lets the thread send what it holds (no more retries).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.queue.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl EventHook for Webhooks {
    fn wants(&self, kind: EventKind) -> bool {
        self.hooks.iter().any(|hook| hook.wants(kind))
    }

    fn wants_topic(&self, topic: &[u8]) -> bool {
        self.hooks.iter().any(|hook| hook.wants_topic(topic))
    }

    fn figures(&self) -> Vec<EventHookFigures> {
        (self.hooks.iter())
            .map(|hook| hook.counters.read(redact_url(&hook.url).into_owned()))
            .collect()
    }

    fn post(&self, event: BrokerEvent) {
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let published = match &event {
            BrokerEvent::MessagePublished { topic, .. } => Some(topic.clone()),
            _ => None,
        };
        let kind = event.kind();
        let wanted = self.hooks.iter().filter(|hook| match &published {
            Some(topic) => hook.wants_topic(topic.as_bytes()),
            None => hook.wants(kind),
        });
        for hook in wanted {
            hook.post(Stamped {
                at_ms,
                event: event.clone(),
            });
        }
    }
}

/// Refuses settings that cannot work.
fn check(settings: &WebhookSettings) -> Result<(), WebhookError> {
    let url = redact_url(&settings.url).into_owned();
    let invalid = |reason: &str| WebhookError::InvalidUrl {
        url: url.clone(),
        reason: reason.to_owned(),
    };
    let uri: ureq::http::Uri = (settings.url.parse()).map_err(|e| invalid(&format!("{e}")))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(invalid("expected an http:// or https:// URL with a host"));
    }
    if settings.events.is_empty() {
        let known: Vec<&str> = EventKind::ALL.iter().map(|k| k.name()).collect();
        let known = known.join(", ");
        return Err(WebhookError::NoEvents { url, known });
    }
    let counts = [
        ("batch_max", settings.batch_max),
        ("queue_capacity", settings.queue_capacity),
        ("max_attempts", settings.max_attempts as usize),
    ];
    match counts.into_iter().find(|(_, n)| *n == 0) {
        Some((what, _)) => Err(WebhookError::Zero { url, what }),
        None => Ok(()),
    }
}

/// The topic filters of `settings`, parsed.
fn topic_filters(settings: &WebhookSettings) -> Result<Vec<FilterMatcher>, WebhookError> {
    (settings.topics.iter())
        .map(|text| {
            let filter = TopicFilter::new(text, &TopicLimits::default());
            filter
                .map(FilterMatcher::new)
                .map_err(|e| WebhookError::InvalidTopic {
                    url: redact_url(&settings.url).into_owned(),
                    filter: text.clone(),
                    reason: e.to_string(),
                })
        })
        .collect()
}

/// `kind`'s bit in a webhook's set of wanted kinds.
fn kind_bit(kind: EventKind) -> u8 {
    1 << (kind as u8)
}
