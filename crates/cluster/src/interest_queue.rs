//! [`InterestQueue`]: the shards' changes of local interest on their way to the cluster
//! thread, netted per filter. A change is never dropped (a lost one would leave a NATS
//! subscription forever, or miss one), yet the queue holds at most one entry per filter whose
//! local count moved since the thread last took them, however long NATS stays away: bounded by
//! the local subscriptions, unlike a channel of every change.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// A change of the local interest in one filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interest {
    /// The whole filter text (`$share/...` included).
    pub filter: String,
    /// +1: one more local subscription; -1: one fewer.
    pub delta: i32,
}

/// Net changes per filter, and the wake-up of the thread that takes them.
#[derive(Debug, Default)]
pub(crate) struct InterestQueue {
    pending: Mutex<HashMap<String, i64>>,
    ready: Notify,
    closed: AtomicBool,
}

impl InterestQueue {
    /// Adds `delta` to `filter`'s net change.
    pub(crate) fn add(&self, filter: &str, delta: i32) {
        if delta == 0 {
            return;
        }
        {
            let mut pending = self.lock();
            let net = pending.entry(filter.to_owned()).or_insert(0);
            *net += i64::from(delta);
            if *net == 0 {
                pending.remove(filter);
            }
        }
        self.ready.notify_one();
    }

    /// No more changes come (the link is gone): [`Self::take`] ends once the last are taken.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
    }

    /// The net changes since the last take, waiting for some; `None` once closed and empty.
    pub(crate) async fn take(&self) -> Option<Vec<Interest>> {
        loop {
            let changes: Vec<Interest> = self
                .lock()
                .drain()
                .map(|(filter, net)| Interest {
                    filter,
                    delta: i32::try_from(net).unwrap_or(if net < 0 { i32::MIN } else { i32::MAX }),
                })
                .collect();
            if !changes.is_empty() {
                return Some(changes);
            }
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            self.ready.notified().await;
        }
    }

    /// Filters with a net change waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_netted_per_filter_and_none_is_lost() {
        let queue = InterestQueue::default();
        for _ in 0..10_000 {
            queue.add("a/#", 1);
            queue.add("a/#", -1);
        }
        queue.add("b", 1);
        queue.add("c", 1);
        queue.add("c", 1);
        assert_eq!(queue.len(), 2, "a/# nets to nothing");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut taken = runtime.block_on(queue.take()).unwrap();
        taken.sort_by(|x, y| x.filter.cmp(&y.filter));
        let nets: Vec<(&str, i32)> = taken.iter().map(|i| (i.filter.as_str(), i.delta)).collect();
        assert_eq!(nets, [("b", 1), ("c", 2)]);
        queue.close();
        assert!(runtime.block_on(queue.take()).is_none());
    }
}
