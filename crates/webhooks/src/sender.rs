//! A webhook's thread: it takes events from the webhook's bounded queue, gathers them into
//! batches (at most `batch_max` events, an event waiting at most `batch_wait`), and POSTs each
//! batch, retrying with a doubling backoff up to `max_attempts`; a batch that never gets a
//! 2xx answer is given up and counted. It stops when the queue's senders are gone (after
//! sending what it holds) or, between attempts, when told to stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use broker_api::redact_url;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use ureq::Agent;

use crate::counters::WebhookCounters;
use crate::json::{Stamped, batch_body};
use crate::settings::WebhookSettings;

/// The most of an answer's body read (and ignored) so that its connection can be reused.
const MAX_BODY: u64 = 64 * 1024;
/// The least time between two warnings of given-up batches.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What the thread works with.
pub(crate) struct Sender {
    pub(crate) settings: WebhookSettings,
    pub(crate) queue: Receiver<Stamped>,
    pub(crate) counters: Arc<WebhookCounters>,
    pub(crate) stop: Arc<AtomicBool>,
    agent: Agent,
    last_warning: Option<Instant>,
}

impl Sender {
    pub(crate) fn new(
        settings: WebhookSettings,
        queue: Receiver<Stamped>,
        counters: Arc<WebhookCounters>,
        stop: Arc<AtomicBool>,
    ) -> Self {
        let agent = Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(settings.timeout))
            .max_idle_connections(1)
            .build()
            .new_agent();
        Self {
            settings,
            queue,
            counters,
            stop,
            agent,
            last_warning: None,
        }
    }

    /// Sends batches until the queue is closed.
    pub(crate) fn run(mut self) {
        while let Ok(first) = self.queue.recv() {
            let batch = self.gather(first);
            self.deliver(&batch);
        }
    }

    /// `first` and the events that follow it within `batch_wait`, up to `batch_max`.
    fn gather(&self, first: Stamped) -> Vec<Stamped> {
        let mut batch = vec![first];
        let deadline = Instant::now() + self.settings.batch_wait;
        while batch.len() < self.settings.batch_max {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.queue.recv_timeout(left) {
                Ok(event) => batch.push(event),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        batch
    }

    /// POSTs `batch` until an attempt gets a 2xx answer or the attempts run out.
    fn deliver(&mut self, batch: &[Stamped]) {
        let body = batch_body(batch, self.settings.include_payload).to_string();
        let count = batch.len() as u64;
        let mut last_error = String::new();
        for attempt in 1..=self.settings.max_attempts {
            if attempt > 1 {
                if self.stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(self.settings.backoff_before(attempt));
            }
            match self.post(&body) {
                Ok(()) => {
                    self.counters.delivered.fetch_add(count, Ordering::Relaxed);
                    return;
                }
                Err(error) => {
                    self.counters
                        .failed_requests
                        .fetch_add(1, Ordering::Relaxed);
                    last_error = error;
                }
            }
        }
        self.counters.given_up.fetch_add(count, Ordering::Relaxed);
        self.warn_given_up(count, &last_error);
    }

    /// One POST; `Err` names what went wrong.
    fn post(&self, body: &str) -> Result<(), String> {
        let response = (self.agent.post(&self.settings.url))
            .header("Content-Type", "application/json")
            .send(body)
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let _ = response
            .into_body()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("status {status}"))
        }
    }

    fn warn_given_up(&mut self, count: u64, error: &str) {
        let due = self
            .last_warning
            .is_none_or(|at| at.elapsed() >= WARN_EVERY);
        if due {
            self.last_warning = Some(Instant::now());
            tracing::warn!(
                url = %redact_url(&self.settings.url),
                events = count,
                attempts = self.settings.max_attempts,
                %error,
                "webhook: a batch of events was given up (counted in ringmq_webhook_events_total{{result=\"given_up\"}})"
            );
        }
    }
}
