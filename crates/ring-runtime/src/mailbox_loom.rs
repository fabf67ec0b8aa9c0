//! A loom model of the mailbox wake-up protocol (`mailbox.rs`, [`crate::mailbox::Waker`]),
//! built only with `RUSTFLAGS="--cfg loom"`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p ring-runtime --lib loom --release
//! ```
//!
//! The model replays the protocol with loom's atomics, with the orderings `Waker` uses:
//! * a lane is one slot per sender: a push is a release store, a pop an acquire swap (as
//!   crossbeam's `ArrayQueue` publishes a slot with a release store of its stamp);
//! * the eventfd is a counter: a notify adds one, the shard's wait takes everything;
//! * sender: push, then `pending.swap(true, AcqRel)`; notify only on a `false -> true` flip;
//! * a bare wake-up (shutdown, a manual clock's advance) is the same swap without a push;
//! * receiver, after its wait saw the eventfd fire: `pending.swap(false, AcqRel)`, then drain.
//!
//! Checked over every interleaving: once everyone stopped, a batch still in a lane always has
//! a notification waiting on the eventfd, so the shard wakes for it (no lost wake-up).

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::thread;

/// The protocol's shared state for `senders` senders.
struct Model {
    slots: Vec<AtomicBool>,
    pending: AtomicBool,
    eventfd: AtomicU64,
}

impl Model {
    fn new(senders: usize) -> Self {
        Self {
            slots: (0..senders).map(|_| AtomicBool::new(false)).collect(),
            pending: AtomicBool::new(false),
            eventfd: AtomicU64::new(0),
        }
    }

    /// `Waker::wake`.
    fn wake(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            self.eventfd.fetch_add(1, Ordering::Release);
        }
    }

    /// `Mailbox::push_to`.
    fn push(&self, sender: usize) {
        self.slots[sender].store(true, Ordering::Release);
        self.wake();
    }

    /// One shard turn: when the eventfd fired, re-arm then drain; returns the batches taken.
    fn turn(&self) -> usize {
        if self.eventfd.swap(0, Ordering::Acquire) == 0 {
            return 0;
        }
        self.pending.swap(false, Ordering::AcqRel);
        self.slots
            .iter()
            .filter(|slot| slot.swap(false, Ordering::Acquire))
            .count()
    }

    /// The property: nothing left in a lane without a notification waiting.
    fn assert_no_lost_wakeup(&self) {
        let left = self
            .slots
            .iter()
            .filter(|slot| slot.load(Ordering::Acquire))
            .count();
        let notified = self.eventfd.load(Ordering::Acquire) > 0;
        assert!(
            left == 0 || notified,
            "{left} batch(es) undrained with no wake-up pending"
        );
    }
}

/// Runs `senders` pushing senders (and a bare waker when `bare_wake`) against a receiver that
/// takes `turns` turns, then checks the property.
fn check(senders: usize, bare_wake: bool, turns: usize) {
    loom::model(move || {
        let model = Arc::new(Model::new(senders));
        let mut threads = Vec::new();
        for sender in 0..senders {
            let model = Arc::clone(&model);
            threads.push(thread::spawn(move || model.push(sender)));
        }
        if bare_wake {
            let model = Arc::clone(&model);
            threads.push(thread::spawn(move || model.wake()));
        }
        let receiver = {
            let model = Arc::clone(&model);
            thread::spawn(move || (0..turns).map(|_| model.turn()).sum::<usize>())
        };
        for handle in threads {
            handle.join().expect("sender");
        }
        let drained = receiver.join().expect("receiver");
        assert!(drained <= senders);
        model.assert_no_lost_wakeup();
    });
}

#[test]
fn loom_two_senders_never_lose_a_wakeup() {
    check(2, false, 2);
}

#[test]
fn loom_a_bare_wakeup_never_hides_a_batch() {
    check(1, true, 2);
}
