//! A counting semaphore whose wait ends at a deadline: bounds a backend's requests in flight
//! (HTTP) or its open connections (Redis) while the wait counts against the request's timeout.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::BackendError;

/// At most `max` holders at once.
#[derive(Debug)]
pub(crate) struct Slots {
    in_use: Mutex<usize>,
    freed: Condvar,
    max: usize,
}

/// One taken slot, given back on drop.
#[derive(Debug)]
pub(crate) struct Slot<'a> {
    slots: &'a Slots,
}

impl Slots {
    /// `max` slots (at least one).
    pub(crate) fn new(max: usize) -> Self {
        Self {
            in_use: Mutex::new(0),
            freed: Condvar::new(),
            max: max.max(1),
        }
    }

    /// Takes a slot, waiting for one to be freed until `deadline`; `None` when none was free by
    /// then.
    pub(crate) fn acquire(&self, deadline: Instant) -> Option<Slot<'_>> {
        let mut in_use = self.lock();
        while *in_use >= self.max {
            let left = remaining(deadline)?;
            in_use = self
                .freed
                .wait_timeout(in_use, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *in_use += 1;
        Some(Slot { slots: self })
    }

    fn lock(&self) -> MutexGuard<'_, usize> {
        self.in_use.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.slots.lock() -= 1;
        self.slots.freed.notify_one();
    }
}

/// The time left until `deadline`; `None` once it has passed.
pub(crate) fn remaining(deadline: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|left| !left.is_zero())
}

/// The error of a question `backend` could not answer within `timeout`.
pub(crate) fn timeout_error(backend: &'static str, timeout: Duration) -> BackendError {
    BackendError::Timeout {
        backend,
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    }
}
