//! The `[[webhooks]]` families of `/metrics`: what became of each webhook's events
//! (docs/operations.md, "Webhooks").

use super::state::OpsState;
use ops::exposition::{Exposition, Kind};

/// Each webhook's events by what became of them, and its failed requests (nothing without
/// webhooks).
pub(super) fn webhooks(doc: &mut Exposition, state: &OpsState) {
    let Some(hook) = &state.shared.links.events else {
        return;
    };
    let figures = hook.figures();
    let name = "ringmq_webhook_events_total";
    doc.family(
        name,
        Kind::Counter,
        "Events per webhook by result: delivered (a 2xx answer), overflowed (its queue was \
         full), given_up (every attempt failed).",
    );
    for f in &figures {
        let results = [
            ("delivered", f.delivered),
            ("overflowed", f.overflowed),
            ("given_up", f.given_up),
        ];
        for (result, value) in results {
            doc.sample(
                name,
                &[("url", f.target.as_str()), ("result", result)],
                value,
            );
        }
    }
    let name = "ringmq_webhook_failed_requests_total";
    doc.family(
        name,
        Kind::Counter,
        "Webhook POSTs that failed (no answer or not 2xx), retried or not.",
    );
    for f in &figures {
        doc.sample(name, &[("url", f.target.as_str())], f.failed_requests);
    }
}
