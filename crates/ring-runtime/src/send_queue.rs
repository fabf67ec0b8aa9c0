//! The outbound queue of one connection. Frames below the shard's coalescing size are copied
//! into one contiguous tail buffer, so a burst of small frames (fan-out PUBLISHes, acks) leaves
//! as one iovec instead of one per frame; larger frames stay shared `Bytes` and are never
//! copied. An idle connection's queue holds no allocation.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

/// Capacity a fresh tail buffer starts with: enough for a few dozen small frames, so a busy
/// connection allocates once per write rather than once per frame. No more than mimalloc's
/// largest small size (1 KiB): those come from its direct per-size free lists, larger ones
/// through a page search (callgrind: about 220 instructions per 2 KiB buffer, 125 per 1 KiB
/// one), and a connection that takes no spare queue allocates a fresh tail for its write.
const TAIL_CHUNK: usize = 1024;

/// A tail this long is sealed into a frame before more is appended: while a write is in flight
/// (a slow reader), frames gather in pieces of this size instead of one buffer that is copied
/// each time it grows.
const TAIL_SEAL: usize = 64 * 1024;

/// A kept queue's frame deque keeps its room up to this many frames.
const SPARE_FRAMES: usize = 8;

thread_local! {
    /// Emptied queues this thread keeps for its next connections that write (each with the
    /// unused rest of its last tail buffer, at most `TAIL_CHUNK` bytes): a connection that gets
    /// one small frame per write (fan-out to many subscribers) then neither allocates nor
    /// frees its queue and tail each time.
    #[expect(clippy::vec_box, reason = "a kept queue goes back to its connection as the box it was")]
    static SPARE: RefCell<Vec<Box<Pending>>> = const { RefCell::new(Vec::new()) };
    /// How many `SPARE` holds at most ([`crate::RuntimeConfig::spare_send_queues`] on a
    /// shard's thread; none elsewhere).
    static SPARE_LIMIT: Cell<usize> = const { Cell::new(0) };
    /// Bytes queued over every send queue of this thread (a shard's thread: its connections',
    /// a layered connection's plain and encrypted queues both).
    static THREAD_QUEUED: Cell<usize> = const { Cell::new(0) };
}

/// Bytes queued for sending over every connection of this thread, in-flight writes included
/// (a layered connection counts its plain and its encrypted queue).
pub(crate) fn queued_on_this_thread() -> usize {
    THREAD_QUEUED.try_with(Cell::get).unwrap_or(0)
}

/// Lets this thread keep up to `limit` emptied send queues (a shard's thread, at its start).
pub(crate) fn keep_spare_queues(limit: usize) {
    SPARE_LIMIT.set(limit);
}

/// Drops the emptied send queues this thread keeps (its shard has gone quiet: idle
/// connections then hold no more than they need).
pub(crate) fn drop_spare_queues() {
    let _ = SPARE.try_with(|spare| *spare.borrow_mut() = Vec::new());
}

/// Frames queued for one connection. Frames taken into an in-flight write stay counted in
/// `queued` until the write completes.
#[derive(Default)]
pub(crate) struct SendQueue {
    /// `None` while nothing waits (one pointer per idle connection).
    pending: Option<Box<Pending>>,
    queued: usize,
}

/// What waits to be written, in wire order: `frames`, then `tail`.
#[derive(Default)]
struct Pending {
    frames: VecDeque<Bytes>,
    tail: BytesMut,
    /// Frames queued since the last write started.
    queued_frames: u32,
}

impl Pending {
    /// A queue for a connection that starts writing: one this thread kept, if any.
    fn take_spare() -> Box<Self> {
        let spare = SPARE.try_with(|spare| spare.borrow_mut().pop());
        spare.ok().flatten().unwrap_or_default()
    }

    /// Keeps an emptied queue for this thread's next connection that writes (within
    /// `SPARE_LIMIT`), without a large tail buffer or frame deque.
    fn recycle(mut self: Box<Self>) {
        debug_assert!(self.is_empty(), "only an emptied queue is kept");
        if self.tail.capacity() > TAIL_CHUNK {
            self.tail = BytesMut::new();
        }
        if self.frames.capacity() > SPARE_FRAMES {
            self.frames = VecDeque::new();
        }
        self.queued_frames = 0;
        // A thread past its end drops the queue instead.
        let limit = SPARE_LIMIT.try_with(Cell::get).unwrap_or(0);
        let _ = SPARE.try_with(|spare| {
            let mut spare = spare.borrow_mut();
            if spare.len() < limit {
                spare.push(self);
            }
        });
    }

    /// Ends the current tail: it becomes a frame, and later small frames start a new one
    /// (sharing the same allocation while it has room).
    fn seal_tail(&mut self) {
        if !self.tail.is_empty() {
            self.frames.push_back(self.tail.split().freeze());
        }
    }

    fn is_empty(&self) -> bool {
        self.frames.is_empty() && self.tail.is_empty()
    }
}

/// Moves `tail` into a buffer with room for `additional` more bytes: twice its length (appending
/// stays linear while the tail is copied on growth), at least `TAIL_CHUNK`, and no more than
/// `TAIL_SEAL` unless one frame needs it. The buffer is sized here, not by `BytesMut::reserve`,
/// which may double past `TAIL_SEAL` or keep a sealed piece's allocation: a sealed piece's
/// allocation then holds about its length, so what a slow reader's queue counts is what it
/// holds (with `reserve`, about half of it).
fn grow_tail(tail: &mut BytesMut, additional: usize) {
    let needed = tail.len() + additional;
    let capacity = (tail.len() * 2).clamp(TAIL_CHUNK, TAIL_SEAL).max(needed);
    let mut grown = BytesMut::with_capacity(capacity);
    grown.extend_from_slice(tail);
    *tail = grown;
}

/// The frames of one writev/sendmsg, moved out of the queue while the write is in flight, and
/// the iovecs that point into them.
#[derive(Default)]
pub(crate) struct WriteBatch {
    pub(crate) bufs: Vec<Bytes>,
    pub(crate) iovecs: Vec<libc::iovec>,
}

impl WriteBatch {
    /// Total bytes in the batch.
    pub(crate) fn len(&self) -> usize {
        self.bufs.iter().map(Bytes::len).sum()
    }

    /// Rebuilds `iovecs` from `bufs`. The pointers stay valid while `bufs` is untouched: a
    /// `Bytes`' data does not move when the `Bytes` handle moves.
    pub(crate) fn build_iovecs(&mut self) {
        self.iovecs.clear();
        self.iovecs.extend(self.bufs.iter().map(|buf| libc::iovec {
            iov_base: buf.as_ptr().cast_mut().cast(),
            iov_len: buf.len(),
        }));
    }
}

impl Drop for SendQueue {
    fn drop(&mut self) {
        self.set_queued(0);
    }
}

impl SendQueue {
    /// Sets what this queue counts, keeping its thread's total (`THREAD_QUEUED`) in step.
    fn set_queued(&mut self, queued: usize) {
        let before = std::mem::replace(&mut self.queued, queued);
        let _ = THREAD_QUEUED.try_with(|total| {
            total.set(total.get().saturating_add(queued).saturating_sub(before));
        });
    }

    fn pending(&mut self) -> &mut Pending {
        self.pending.get_or_insert_with(Pending::take_spare)
    }

    /// The tail, ready for `additional` more bytes: sealed first when they would take it over
    /// `TAIL_SEAL`, grown when its buffer has no room for them.
    fn tail_for(&mut self, additional: usize) -> &mut BytesMut {
        let pending = self.pending();
        if !pending.tail.is_empty() && pending.tail.len() + additional > TAIL_SEAL {
            pending.seal_tail();
        }
        let tail = &mut pending.tail;
        if tail.capacity() - tail.len() < additional {
            grow_tail(tail, additional);
        }
        tail
    }

    /// Queues a frame: copied into the tail when shorter than `coalesce_below`, otherwise
    /// queued as it is.
    pub(crate) fn push(&mut self, frame: Bytes, coalesce_below: usize) {
        self.set_queued(self.queued + frame.len());
        let pending = self.pending();
        pending.queued_frames = pending.queued_frames.saturating_add(1);
        if frame.len() < coalesce_below {
            self.tail_for(frame.len()).extend_from_slice(&frame);
        } else {
            let pending = self.pending();
            pending.seal_tail();
            pending.frames.push_back(frame);
        }
    }

    /// Lets `write` append bytes to the tail directly (encoding a frame in place, without an
    /// intermediate buffer), with room for at least `expected` bytes made first. `write` may
    /// truncate back what it appended, never more.
    pub(crate) fn append<R>(
        &mut self,
        expected: usize,
        write: impl FnOnce(&mut BytesMut) -> R,
    ) -> R {
        let tail = self.tail_for(expected);
        let before = tail.len();
        let result = write(tail);
        let after = tail.len();
        debug_assert!(after >= before, "append removed bytes queued before it");
        self.set_queued((self.queued + after).saturating_sub(before));
        if let Some(pending) = self.pending.as_mut() {
            if after > before {
                pending.queued_frames = pending.queued_frames.saturating_add(1);
            } else if pending.is_empty()
                && let Some(emptied) = self.pending.take()
            {
                emptied.recycle();
            }
        }
        result
    }

    /// Frames queued since the last write started (each `push`, and each `append` that
    /// wrote something, counts one).
    pub(crate) fn frames_waiting(&self) -> u32 {
        self.pending.as_ref().map_or(0, |p| p.queued_frames)
    }

    /// Bytes queued, including those of an in-flight write.
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued
    }

    /// Whether frames wait that are not yet in a write.
    pub(crate) fn has_unsent(&self) -> bool {
        self.pending.as_ref().is_some_and(|p| !p.is_empty())
    }

    /// Moves up to `max_iovecs` frames into `batch` (which must be empty). The tail goes
    /// straight into the batch once every frame before it has: a write of small frames only
    /// (most writes) never allocates the frame deque.
    pub(crate) fn take_batch(&mut self, max_iovecs: usize, batch: &mut WriteBatch) {
        if let Some(pending) = self.pending.as_mut() {
            pending.queued_frames = 0;
            let count = pending.frames.len().min(max_iovecs);
            batch.bufs.extend(pending.frames.drain(..count));
            if pending.frames.is_empty() && count < max_iovecs && !pending.tail.is_empty() {
                batch.bufs.push(pending.tail.split().freeze());
            }
        }
        batch.build_iovecs();
    }

    /// Accounts a completed write of `written` bytes: fully written frames are dropped, the
    /// rest go back to the front of the queue in their order. Leaves `batch` empty.
    pub(crate) fn complete(&mut self, batch: &mut WriteBatch, written: usize) {
        self.set_queued(self.queued - written.min(self.queued));
        let mut skip = written;
        let mut first_unwritten = batch.bufs.len();
        for (index, buf) in batch.bufs.iter_mut().enumerate() {
            if skip >= buf.len() {
                skip -= buf.len();
                continue;
            }
            buf.advance(skip);
            first_unwritten = index;
            break;
        }
        if first_unwritten < batch.bufs.len() {
            let pending = self.pending();
            for buf in batch.bufs.drain(first_unwritten..).rev() {
                pending.frames.push_front(buf);
            }
        }
        batch.bufs.clear();
        batch.iovecs.clear();
        if self.pending.as_ref().is_some_and(|p| p.is_empty()) {
            // An idle connection keeps no send buffer (memory per idle connection matters more
            // than one small allocation on the next send); its thread may keep it for reuse.
            if let Some(emptied) = self.pending.take() {
                emptied.recycle();
            }
        }
    }

    /// Moves every queued frame into `frames`, in order, and empties the queue (a layered
    /// connection's plain queue, which is never written directly).
    pub(crate) fn take_all(&mut self, frames: &mut Vec<Bytes>) {
        if let Some(mut pending) = self.pending.take() {
            frames.extend(pending.frames.drain(..));
            if !pending.tail.is_empty() {
                frames.push(pending.tail.split().freeze());
            }
            pending.recycle();
        }
        self.set_queued(0);
    }

    /// Drops everything queued (abort).
    pub(crate) fn clear(&mut self) {
        self.pending = None;
        self.set_queued(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames shorter than this are coalesced in these tests.
    const SMALL: usize = 8;

    fn frames(queue: &mut SendQueue) -> Vec<Bytes> {
        let mut batch = WriteBatch::default();
        queue.take_batch(usize::MAX, &mut batch);
        batch.bufs
    }

    fn large(text: &'static str) -> Bytes {
        assert!(text.len() >= SMALL);
        Bytes::from_static(text.as_bytes())
    }

    #[test]
    fn partial_write_resumes_where_it_stopped() {
        let mut queue = SendQueue::default();
        for frame in ["abcdefgh", "ijklmnopq", "rstuvwxyz"] {
            queue.push(large(frame), SMALL);
        }
        assert_eq!(queue.queued_bytes(), 26);
        let mut batch = WriteBatch::default();
        queue.take_batch(2, &mut batch);
        assert_eq!(batch.iovecs.len(), 2);
        assert_eq!(batch.len(), 17);
        assert_eq!(queue.queued_bytes(), 26, "in-flight bytes stay counted");
        queue.complete(&mut batch, 10);
        assert_eq!(queue.queued_bytes(), 16);
        assert!(batch.bufs.is_empty());
        let rest = frames(&mut queue);
        assert_eq!(
            rest,
            vec![Bytes::from_static(b"klmnopq"), large("rstuvwxyz")]
        );
    }

    #[test]
    fn unwritten_frames_keep_their_order() {
        let mut queue = SendQueue::default();
        for frame in ["a", "bbbbbbbbbb", "c", "d", "eeeeeeeeee"] {
            queue.push(Bytes::from_static(frame.as_bytes()), SMALL);
        }
        let mut batch = WriteBatch::default();
        queue.take_batch(2, &mut batch);
        queue.complete(&mut batch, 0);
        let all: Vec<u8> = frames(&mut queue).concat();
        assert_eq!(all, b"abbbbbbbbbbcdeeeeeeeeee");
    }

    #[test]
    fn a_tail_behind_frames_beyond_the_iovec_limit_waits_its_turn() {
        let mut queue = SendQueue::default();
        for frame in ["AAAAAAAA", "BBBBBBBB", "CCCCCCCC"] {
            queue.push(large(frame), SMALL);
        }
        queue.push(Bytes::from_static(b"x"), SMALL);
        let mut batch = WriteBatch::default();
        queue.take_batch(2, &mut batch);
        assert_eq!(batch.bufs, vec![large("AAAAAAAA"), large("BBBBBBBB")]);
        queue.push(Bytes::from_static(b"y"), SMALL);
        queue.complete(&mut batch, 16);
        let rest = frames(&mut queue);
        assert_eq!(rest, vec![large("CCCCCCCC"), Bytes::from_static(b"xy")]);
    }

    #[test]
    fn small_frames_leave_as_one_iovec() {
        let mut queue = SendQueue::default();
        for frame in ["ab", "cd", "ef"] {
            queue.push(Bytes::from_static(frame.as_bytes()), SMALL);
        }
        queue.append(2, |tail| tail.extend_from_slice(b"gh"));
        let mut batch = WriteBatch::default();
        queue.take_batch(usize::MAX, &mut batch);
        assert_eq!(batch.iovecs.len(), 1);
        assert_eq!(batch.bufs, vec![Bytes::from_static(b"abcdefgh")]);
        queue.complete(&mut batch, 8);
        assert_eq!(queue.queued_bytes(), 0);
        assert!(
            queue.pending.is_none(),
            "a drained queue holds no allocation"
        );
    }

    #[test]
    fn emptied_queues_are_kept_for_reuse_within_bounds() {
        const KEPT: usize = 16;
        keep_spare_queues(KEPT);
        let spare = || SPARE.with(|spare| spare.borrow().len());
        let mut queues: Vec<SendQueue> = (0..KEPT + 8).map(|_| SendQueue::default()).collect();
        let mut batch = WriteBatch::default();
        for (index, queue) in queues.iter_mut().enumerate() {
            // Every fourth queue grew its tail past the fresh size (its buffer is not kept).
            let len = if index % 4 == 0 { 3 * TAIL_CHUNK } else { 5 };
            queue.append(len, |tail| tail.extend_from_slice(&vec![b'x'; len]));
        }
        for queue in &mut queues {
            queue.take_batch(usize::MAX, &mut batch);
            let written = batch.len();
            queue.complete(&mut batch, written);
            assert!(queue.pending.is_none());
        }
        assert_eq!(spare(), KEPT);
        SPARE.with(|spare| {
            for kept in spare.borrow().iter() {
                assert!(kept.is_empty() && kept.tail.capacity() <= TAIL_CHUNK);
            }
        });
        // A queue that writes again takes a kept one and its frames come out whole.
        let mut queue = SendQueue::default();
        queue.push(Bytes::from_static(b"ab"), SMALL);
        assert_eq!(spare(), KEPT - 1);
        assert_eq!(frames(&mut queue), vec![Bytes::from_static(b"ab")]);
        drop_spare_queues();
        assert_eq!(spare(), 0, "a quiet shard keeps none");
        keep_spare_queues(0);
    }

    #[test]
    fn a_large_frame_ends_the_tail_and_keeps_order() {
        let mut queue = SendQueue::default();
        queue.push(Bytes::from_static(b"ab"), SMALL);
        queue.push(large("LARGE-FRAME"), SMALL);
        queue.push(Bytes::from_static(b"cd"), SMALL);
        let parts = frames(&mut queue);
        assert_eq!(
            parts,
            vec![
                Bytes::from_static(b"ab"),
                large("LARGE-FRAME"),
                Bytes::from_static(b"cd")
            ]
        );
    }

    #[test]
    fn frames_queued_during_a_write_follow_it() {
        let mut queue = SendQueue::default();
        queue.push(Bytes::from_static(b"ab"), SMALL);
        let mut batch = WriteBatch::default();
        queue.take_batch(usize::MAX, &mut batch);
        queue.push(Bytes::from_static(b"cd"), SMALL);
        queue.complete(&mut batch, 1);
        assert_eq!(queue.queued_bytes(), 3);
        assert_eq!(frames(&mut queue).concat(), b"bcd");
    }

    #[test]
    fn a_long_tail_is_sealed_into_pieces() {
        let mut queue = SendQueue::default();
        let frame = Bytes::from(vec![7u8; 100]);
        let count = 3 * TAIL_SEAL / 100;
        for _ in 0..count {
            queue.push(frame.clone(), 512);
        }
        let parts = frames(&mut queue);
        assert!(parts.len() >= 3, "{} pieces", parts.len());
        assert!(parts.iter().all(|p| p.len() < TAIL_SEAL + 100));
        assert_eq!(parts.iter().map(Bytes::len).sum::<usize>(), count * 100);
    }

    #[test]
    fn counts_the_frames_queued_since_the_last_write() {
        let mut queue = SendQueue::default();
        assert_eq!(queue.frames_waiting(), 0);
        queue.push(Bytes::from_static(b"ab"), SMALL);
        queue.push(large("LARGE-FRAME"), SMALL);
        queue.append(2, |tail| tail.extend_from_slice(b"cd"));
        queue.append(2, |_| ());
        assert_eq!(queue.frames_waiting(), 3);
        let mut batch = WriteBatch::default();
        queue.take_batch(usize::MAX, &mut batch);
        assert_eq!(queue.frames_waiting(), 0);
        queue.push(Bytes::from_static(b"ef"), SMALL);
        queue.complete(&mut batch, 0);
        assert_eq!(
            queue.frames_waiting(),
            1,
            "a short write puts frames back, not counts"
        );
    }

    #[test]
    fn take_all_empties_the_queue_in_order() {
        let mut queue = SendQueue::default();
        queue.push(Bytes::from_static(b"ab"), SMALL);
        queue.push(large("a large frame"), SMALL);
        queue.push(Bytes::from_static(b"cd"), SMALL);
        let mut taken = Vec::new();
        queue.take_all(&mut taken);
        assert_eq!(taken.concat(), b"aba large framecd");
        assert_eq!(queue.queued_bytes(), 0);
        assert!(!queue.has_unsent());
    }

    #[test]
    fn an_append_that_takes_back_its_bytes_leaves_nothing() {
        let mut queue = SendQueue::default();
        let wrote = queue.append(2, |tail| {
            let start = tail.len();
            tail.extend_from_slice(b"too large");
            tail.truncate(start);
            false
        });
        assert!(!wrote);
        assert_eq!(queue.queued_bytes(), 0);
        assert!(!queue.has_unsent());
        assert!(queue.pending.is_none());
    }

    #[test]
    fn a_slow_readers_tail_never_grows_past_the_seal_size() {
        let mut queue = SendQueue::default();
        let frame = Bytes::from(vec![7u8; 110]);
        for _ in 0..40_000 {
            queue.push(frame.clone(), 200);
            let tail = &queue.pending.as_ref().expect("frames wait").tail;
            assert!(
                tail.capacity() <= TAIL_SEAL,
                "tail capacity {}",
                tail.capacity()
            );
        }
        let pieces = frames(&mut queue);
        assert_eq!(pieces.iter().map(Bytes::len).sum::<usize>(), 40_000 * 110);
        // Every sealed piece but the last fills its buffer to within one frame.
        let short = pieces[..pieces.len() - 1]
            .iter()
            .filter(|p| p.len() + 110 <= TAIL_SEAL);
        assert_eq!(short.count(), 0);
    }

    #[test]
    fn the_threads_total_follows_every_queue_of_the_thread() {
        let start = queued_on_this_thread();
        let mut first = SendQueue::default();
        let mut second = SendQueue::default();
        first.push(Bytes::from_static(b"abc"), SMALL);
        second.push(large("a large frame"), SMALL);
        assert_eq!(queued_on_this_thread(), start + 3 + 13);
        let mut batch = WriteBatch::default();
        first.take_batch(usize::MAX, &mut batch);
        first.complete(&mut batch, 2);
        assert_eq!(queued_on_this_thread(), start + 1 + 13);
        drop(second);
        assert_eq!(queued_on_this_thread(), start + 1);
        first.clear();
        assert_eq!(queued_on_this_thread(), start);
    }
}
