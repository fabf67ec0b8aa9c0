//! What arrived for connections whose reading is paused, held back (handed over by `paused.rs`).

use crate::backend::Event;
use crate::ids::ConnId;

/// Events of paused connections, held back.
#[derive(Default)]
pub(super) struct Held {
    /// In arrival order; only `Data` and `Eof`.
    pub(super) events: Vec<Event>,
    /// A connection with held events was resumed: hand them over next turn.
    pub(super) due: bool,
}

impl Held {
    /// Whether held events wait to be handed over (the next wait must not block).
    pub(super) fn is_due(&self) -> bool {
        self.due
    }

    /// Keeps `event` of a paused connection.
    pub(super) fn hold(&mut self, event: Event) {
        self.events.push(event);
    }

    /// Forgets what is held for a released connection.
    pub(super) fn forget(&mut self, id: ConnId) {
        if !self.events.is_empty() {
            self.events.retain(|event| event_conn(event) != Some(id));
        }
    }

    pub(super) fn holds_for(&self, id: ConnId) -> bool {
        self.events
            .iter()
            .any(|event| event_conn(event) == Some(id))
    }
}

/// The connection an event is about (held events always have one).
fn event_conn(event: &Event) -> Option<ConnId> {
    match event {
        Event::Data { conn, .. } | Event::Eof { conn } => Some(*conn),
        _ => None,
    }
}
