//! Input fences: has every other shard handed its handler the input that reached it before
//! now? A handler that must not act on a packet before another shard's earlier packet
//! (a PUBLISH after another client's SUBSCRIBE) asks for a fence and waits until it passes.
//!
//! Each shard numbers its *drains*: looks at the kernel that take everything pending
//! (`io_uring_enter` running all queued task work, `epoll_wait` returning fewer events than
//! it could; bytes beyond a connection's per-turn read budget wait for its next read), and
//! publishes the number of the last drain whose events its handler has had
//! (`handled`, right after the handler has had them). Input that reached a shard before a moment is
//! handled once the first drain begun after that moment is: a fence on shard `j` taken now
//! passes when `handled(j) > drains(j)` as read now.
//!
//! A shard asleep in its wait with nothing pending needs no drain. It flags itself asleep
//! (with a generation) right before a blocking wait and clears the flag right after; while
//! the flag stands and the kernel shows its thread blocked (`S` in `/proc/<tid>/stat`), it has
//! nothing unhandled: input that reached it before would have kept it from blocking (the
//! wait returns at once when something is pending) or woken it (running again, state `R`),
//! and a wake ends the generation before the shard handles anything. Read in that order
//! (flag, state, flag unchanged), the check costs one `pread` (about 2.5 µs); it spares a
//! round trip that would wake the sleeping shard.
//!
//! A fence is first asked for *softly* (`asked`): the shard asked makes its next look a drain
//! (with io_uring also a look that could block, which under a flood would otherwise return at
//! once with input and be no drain), may then sleep (proving it has nothing unhandled), and nobody waits for it; a handler
//! that cannot act before the fence passes *insists* ([`FenceBook::insist`]): then the shard
//! asked does not block until it has made a drain (`wanted`), and wakes the shards waiting on
//! it (`waiters`) when it publishes `handled`.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::ids::ShardId;
use crate::mailbox::Waker;

/// Every shard's drain counters, and how to wake each shard.
pub(crate) struct FenceBoard {
    shards: Box<[ShardInput]>,
    wakers: Box<[Arc<Waker>]>,
}

/// One shard's side of the board, on cache lines of its own.
#[derive(Default)]
#[repr(align(128))]
pub(crate) struct ShardInput {
    /// Number of the latest drain begun.
    drains: AtomicU64,
    /// Number of the latest drain whose events the handler has had.
    handled: AtomicU64,
    /// The highest drain number another shard waits for.
    wanted: AtomicU64,
    /// The highest drain another shard asked for without waiting on it.
    asked: AtomicU64,
    /// Generation of the shard's sleeps, shifted left by one; the low bit is set while it is
    /// about to block or blocked in its wait.
    sleep: AtomicU64,
    /// Shards waiting on `handled` (bit `i % 64` for shard `i`).
    waiters: AtomicU64,
    /// The shard thread's `/proc/thread-self/stat`, for its scheduling state.
    stat: OnceLock<File>,
}

impl FenceBoard {
    pub(crate) fn new(wakers: Box<[Arc<Waker>]>) -> Self {
        Self {
            shards: (0..wakers.len()).map(|_| ShardInput::default()).collect(),
            wakers,
        }
    }

    pub(crate) fn shard(&self, index: usize) -> &ShardInput {
        &self.shards[index]
    }

    /// Publishes that shard `index`'s handler has had the events of drain `drain`, and wakes
    /// whoever waits for it.
    pub(crate) fn handled(&self, index: usize, drain: u64) {
        let input = self.shard(index);
        input.handled.store(drain, Ordering::SeqCst);
        if input.waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        let waiters = input.waiters.swap(0, Ordering::SeqCst);
        for (shard, waker) in self.wakers.iter().enumerate() {
            if waiters & (1 << (shard % 64)) != 0 && shard != index {
                waker.wake();
            }
        }
    }
}

/// A shard's own place on the board, as its backend sees it.
pub(crate) struct FenceSide<'a> {
    pub(crate) board: &'a FenceBoard,
    pub(crate) index: usize,
}

impl FenceSide<'_> {
    pub(crate) fn input(&self) -> &ShardInput {
        self.board.shard(self.index)
    }
}

impl ShardInput {
    /// Starts a drain; returns its number.
    pub(crate) fn begin_drain(&self) -> u64 {
        self.drains.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Whether another shard waits for a drain this shard has not handled yet.
    pub(crate) fn drain_wanted(&self) -> bool {
        self.wanted.load(Ordering::SeqCst) > self.handled.load(Ordering::SeqCst)
    }

    /// Whether a look that does not block should be a drain: one is wanted, or asked for
    /// softly.
    pub(crate) fn drain_asked(&self) -> bool {
        let handled = self.handled.load(Ordering::Relaxed);
        self.asked.load(Ordering::Relaxed) > handled || self.drain_wanted()
    }

    /// Flags the shard asleep, right before a blocking wait; `false`, with the flag cleared
    /// again, if a drain is wanted meanwhile (then the shard must not block).
    pub(crate) fn fall_asleep(&self) -> bool {
        let generation = self.sleep.load(Ordering::Relaxed) >> 1;
        self.sleep
            .store(((generation + 1) << 1) | 1, Ordering::SeqCst);
        if self.drain_wanted() {
            self.wake_up();
            return false;
        }
        true
    }

    /// Clears the asleep flag, right after the wait.
    pub(crate) fn wake_up(&self) {
        let sleep = self.sleep.load(Ordering::Relaxed);
        self.sleep.store(sleep & !1, Ordering::SeqCst);
    }

    fn is_asleep(&self) -> bool {
        self.sleep.load(Ordering::SeqCst) & 1 == 1
    }

    /// Lets other shards read this thread's scheduling state (call on the shard's thread);
    /// without `/proc`, every fence on this shard waits for a drain.
    pub(crate) fn watch_this_thread(&self) {
        if let Ok(stat) = File::open("/proc/thread-self/stat") {
            let _ = self.stat.set(stat);
        }
    }

    /// Whether the kernel shows the shard's thread blocked (`S`).
    fn thread_blocked(&self) -> bool {
        let Some(stat) = self.stat.get() else {
            return false;
        };
        let mut line = [0u8; 128];
        let Ok(read) = stat.read_at(&mut line, 0) else {
            return false;
        };
        // "pid (comm) S ...": the state follows the last ')' (a name may hold one).
        let line = &line[..read];
        line.iter()
            .rposition(|&byte| byte == b')')
            .and_then(|close| line.get(close + 2))
            == Some(&b'S')
    }

    /// The drain another shard must see handled for what reached this one before now, or
    /// `None` when nothing did that is not handled (asleep in its wait).
    fn fence_target(&self) -> Option<u64> {
        let sleep = self.sleep.load(Ordering::SeqCst);
        if sleep & 1 == 1 && self.thread_blocked() && self.sleep.load(Ordering::SeqCst) == sleep {
            return None;
        }
        Some(self.drains.load(Ordering::SeqCst) + 1)
    }
}

/// When a shard took a turn's input from the kernel, for ordering it against another shard's
/// fence ([`FenceMarks::may_precede`]): the number of the last drain that shard completed
/// before the look that took the input (0: none yet). Input that reached the shard before a
/// drain began is taken by that drain at the latest, so input stamped with a drain at or
/// after a fence's mark for the shard reached it after the fence was taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct InputStamp(u64);

/// What a fence marked on every other shard when it was taken: the first drain that had not
/// begun (0 where the shard slept with nothing pending, or for the asking shard itself).
/// Shared with the fence's own record: handing them out costs no allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FenceMarks(Arc<[u64]>);

impl InputStamp {
    /// The stamp of input taken after drain `drain` completed (for tests and simulations).
    pub fn after_drain(drain: u64) -> Self {
        Self(drain)
    }
}

impl FenceMarks {
    /// Marks of a fence, by shard (for tests and simulations; the runtime takes them).
    pub fn from_marks(marks: Vec<u64>) -> Self {
        Self(marks.into())
    }

    /// Whether input that shard `shard` took with `stamp` may have reached it before the fence
    /// was taken (false only when it surely came after).
    pub fn may_precede(&self, shard: ShardId, stamp: InputStamp) -> bool {
        let mark = self.0.get(shard.index()).copied().unwrap_or(0);
        mark != 0 && stamp.0 < mark
    }
}

/// A fence a handler asked for ([`crate::ShardCtx::input_fence`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct InputFence(u64);

impl InputFence {
    /// A fence that has passed from the start (no other shard had input left to handle).
    pub const PASSED: Self = Self(0);
}

/// How long a fence waits at most: a shard that cannot make a drain (its socket reads never
/// come short under a flood, or its thread is starved) lets the fence pass after this, counted
/// in [`crate::ShardStats::input_fences_expired`], rather than hold the asker's input for good.
pub const INPUT_FENCE_PATIENCE: Duration = Duration::from_millis(250);

/// A fence not passed yet.
struct Waiting {
    fence: InputFence,
    /// Whether the handler waits for it (the shards asked may not sleep before a drain, and
    /// wake this one).
    insisted: bool,
    /// The drain each shard must have handled (0: none asked).
    targets: Arc<[u64]>,
    asked_at: Instant,
}

/// One shard's fences: asked, waiting, passed.
pub(crate) struct FenceBook {
    board: Arc<FenceBoard>,
    me: usize,
    /// The fence asked for in this turn (input harvested since covers the same).
    this_turn: Option<InputFence>,
    /// Fences not passed yet, oldest first.
    waiting: VecDeque<Waiting>,
    last_id: u64,
    /// Every fence up to this one has passed.
    passed: InputFence,
    /// The last passed fence the handler was told about.
    reported: InputFence,
    /// The last drain this shard completed, and the stamp of this turn's input.
    last_drain: u64,
    turn_stamp: InputStamp,
}

impl FenceBook {
    pub(crate) fn new(board: Arc<FenceBoard>, me: usize) -> Self {
        Self {
            board,
            me,
            this_turn: None,
            waiting: VecDeque::new(),
            last_id: 0,
            passed: InputFence::PASSED,
            reported: InputFence::PASSED,
            last_drain: 0,
            turn_stamp: InputStamp(0),
        }
    }

    /// A new turn's input was harvested, by drain `drain` if its look was one: the next fence
    /// asked for must look again, and the input is stamped with the drain completed before.
    pub(crate) fn new_turn(&mut self, drain: Option<u64>) {
        self.this_turn = None;
        self.turn_stamp = InputStamp(self.last_drain);
        if let Some(drain) = drain {
            self.last_drain = drain;
        }
    }

    /// The stamp of this turn's input.
    pub(crate) fn turn_stamp(&self) -> InputStamp {
        self.turn_stamp
    }

    /// The marks `fence` took, while it waits (`None` once it has passed, or for
    /// [`InputFence::PASSED`]).
    pub(crate) fn marks(&self, fence: InputFence) -> Option<FenceMarks> {
        let waiting = self.waiting.iter().rev().find(|w| w.fence == fence)?;
        Some(FenceMarks(Arc::clone(&waiting.targets)))
    }

    /// The fence for the input handed over so far (one per turn), asked at `now`.
    pub(crate) fn fence(&mut self, now: Instant) -> InputFence {
        if let Some(fence) = self.this_turn {
            return fence;
        }
        let fence = self.take_fence(now);
        self.this_turn = Some(fence);
        fence
    }

    fn take_fence(&mut self, now: Instant) -> InputFence {
        let shards = self.board.shards.len();
        // Allocated only for a fence that waits (at light load every other shard is asleep).
        let mut targets: Option<Vec<u64>> = None;
        for index in (0..shards).filter(|&index| index != self.me) {
            if let Some(drain) = self.board.shard(index).fence_target() {
                targets.get_or_insert_with(|| vec![0; shards])[index] = drain;
            }
        }
        let Some(targets) = targets else {
            return InputFence::PASSED;
        };
        self.last_id += 1;
        let fence = InputFence(self.last_id);
        for (index, &target) in targets.iter().enumerate() {
            if target != 0 {
                let input = self.board.shard(index);
                input.asked.fetch_max(target, Ordering::Relaxed);
            }
        }
        self.waiting.push_back(Waiting {
            fence,
            insisted: false,
            targets: targets.into(),
            asked_at: now,
        });
        fence
    }

    /// The handler waits for `fence` to pass: the shards it marked drain before they next
    /// block, and wake this one when they have.
    pub(crate) fn insist(&mut self, fence: InputFence) {
        let Some(waiting) = self.waiting.iter_mut().find(|w| w.fence == fence) else {
            return;
        };
        if waiting.insisted {
            return;
        }
        waiting.insisted = true;
        let targets = Arc::clone(&waiting.targets);
        for (index, &target) in targets.iter().enumerate() {
            if target != 0 {
                self.ask(index, target);
            }
        }
    }

    /// Asks shard `index` for drain `target`: it will not block before it has handled one,
    /// and wakes this shard then.
    fn ask(&self, index: usize, target: u64) {
        let input = self.board.shard(index);
        input.wanted.fetch_max(target, Ordering::SeqCst);
        input
            .waiters
            .fetch_or(1 << (self.me % 64), Ordering::SeqCst);
        if input.is_asleep() {
            self.board.wakers[index].wake();
        }
    }

    /// Whether `fence` has passed (as of the last [`Self::refresh`]).
    pub(crate) fn passed(&self, fence: InputFence) -> bool {
        fence <= self.passed
    }

    /// Whether any fence waits.
    pub(crate) fn is_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Looks at the board again (before the shard may block, and at the start of a turn);
    /// returns how many fences passed for having waited [`INPUT_FENCE_PATIENCE`].
    pub(crate) fn refresh(&mut self, now: Instant) -> u64 {
        let mut expired = 0;
        while let Some(waiting) = self.waiting.front() {
            if !self.reached(&waiting.targets, waiting.insisted) {
                if now.saturating_duration_since(waiting.asked_at) < INPUT_FENCE_PATIENCE {
                    break;
                }
                expired += 1;
            }
            self.passed = waiting.fence;
            self.waiting.pop_front();
        }
        expired
    }

    /// When the oldest fence the handler waits for runs out of patience.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let insisted = self.waiting.iter().find(|waiting| waiting.insisted);
        insisted.map(|waiting| waiting.asked_at + INPUT_FENCE_PATIENCE)
    }

    /// Whether fences passed that the handler has not been told about.
    pub(crate) fn has_news(&self) -> bool {
        self.passed != self.reported
    }

    /// Marks the passed fences as told.
    pub(crate) fn take_news(&mut self) -> bool {
        let news = self.has_news();
        self.reported = self.passed;
        news
    }

    /// Whether every shard has handled its target drain, or sleeps with nothing unhandled;
    /// for a fence the handler waits on (`insisted`), re-asks (as a waiter) those that have
    /// not, so their next publication wakes this shard.
    fn reached(&self, targets: &[u64], insisted: bool) -> bool {
        let mut reached = true;
        for (index, &target) in targets.iter().enumerate() {
            if target == 0 {
                continue;
            }
            let input = self.board.shard(index);
            if input.handled.load(Ordering::SeqCst) >= target {
                continue;
            }
            if insisted {
                self.ask(index, target);
                // Asked before looking again: either this sees the publication, or the
                // shard publishing sees the waiter bit.
                if input.handled.load(Ordering::SeqCst) >= target {
                    continue;
                }
            }
            reached &= input.fence_target().is_none();
        }
        reached
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(shards: usize) -> Arc<FenceBoard> {
        let wakers = (0..shards)
            .map(|_| Arc::new(Waker::new().expect("eventfd")))
            .collect();
        Arc::new(FenceBoard::new(wakers))
    }

    #[test]
    fn a_fence_passes_once_the_other_shard_handles_a_drain_begun_after_it() {
        let board = board(2);
        let mut book = FenceBook::new(Arc::clone(&board), 0);
        let now = Instant::now();
        let fence = book.fence(now);
        assert!(
            !book.passed(fence),
            "an awake shard may hold unhandled input"
        );
        assert!(
            board.shard(1).drain_asked() && !board.shard(1).drain_wanted(),
            "the other shard is asked softly for a drain"
        );
        book.insist(fence);
        assert!(
            board.shard(1).drain_wanted(),
            "insisting, it wants one before the other shard blocks"
        );
        // A drain begun before the fence does not count.
        board.handled(1, 0);
        assert_eq!(book.refresh(now), 0);
        assert!(!book.passed(fence));
        let drain = board.shard(1).begin_drain();
        board.handled(1, drain);
        assert_eq!(book.refresh(now), 0);
        assert!(book.passed(fence));
        assert!(book.take_news() && !book.take_news());
        assert!(!board.shard(1).drain_wanted());
    }

    #[test]
    fn one_fence_per_turn_and_none_needed_alone() {
        let board = board(2);
        let mut book = FenceBook::new(Arc::clone(&board), 0);
        let now = Instant::now();
        let first = book.fence(now);
        assert_eq!(book.fence(now), first, "the same turn asks once");
        book.new_turn(None);
        assert!(book.fence(now) > first, "a new turn asks again");
        let mut alone = FenceBook::new(super::tests::board(1), 0);
        assert_eq!(alone.fence(now), InputFence::PASSED);
    }

    #[test]
    fn a_fence_no_drain_answers_passes_after_its_patience_counted() {
        let board = board(2);
        let mut book = FenceBook::new(Arc::clone(&board), 0);
        let now = Instant::now();
        let fence = book.fence(now);
        assert_eq!(book.deadline(), None, "nobody waits for a soft fence");
        book.insist(fence);
        assert_eq!(book.deadline(), Some(now + INPUT_FENCE_PATIENCE));
        assert_eq!(book.refresh(now + INPUT_FENCE_PATIENCE / 2), 0);
        assert!(!book.passed(fence));
        assert_eq!(book.refresh(now + INPUT_FENCE_PATIENCE), 1);
        assert!(book.passed(fence));
        assert_eq!(book.deadline(), None);
    }

    #[test]
    fn input_stamped_with_a_drain_begun_after_a_fence_came_after_it() {
        let board = board(2);
        let mut asker = FenceBook::new(Arc::clone(&board), 0);
        let mut other = FenceBook::new(Arc::clone(&board), 1);
        let now = Instant::now();
        let shard = ShardId::new(1);
        // The other shard completed drain 1, then took input in a look that was no drain.
        let first = board.shard(1).begin_drain();
        other.new_turn(Some(first));
        other.new_turn(None);
        let before = other.turn_stamp();
        let fence = asker.fence(now);
        let marks = asker
            .marks(fence)
            .expect("the fence waits for the other shard");
        assert!(marks.may_precede(shard, before));
        // A drain begun after the fence: the input it took may still precede the fence
        // (stamped with the drain before it); input taken in a later look came after.
        let second = board.shard(1).begin_drain();
        other.new_turn(Some(second));
        assert!(marks.may_precede(shard, other.turn_stamp()));
        other.new_turn(None);
        assert!(!marks.may_precede(shard, other.turn_stamp()));
        assert!(
            !marks.may_precede(ShardId::new(0), InputStamp(0)),
            "no mark on the asker"
        );
    }
}
