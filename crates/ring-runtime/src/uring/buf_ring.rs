//! A provided-buffer ring (`IORING_REGISTER_PBUF_RING`): the kernel picks a buffer per
//! multishot-receive completion, so an idle connection holds no read buffer.
//!
//! Ownership rule: a buffer id handed out in a completion belongs to the shard until
//! [`BufRing::take`] copies its bytes into a fresh `Bytes` (the handler's to keep) and gives
//! the buffer back to the [`BufPolicy`], which decides what the ring offers next (only as many
//! buffers as the traffic needs, warm ones first). `take` is the only place buffers are
//! returned. A buffer's pages go back to the OS while it is spare (neither offered nor held),
//! or while it sits in the ring beyond the target (or anywhere in it, once the shard has gone
//! quiet) and the kernel provably has not picked it (see [`BufRing::trim`] and
//! [`BufRing::release_every_buffer`]).

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Instant;

use bytes::Bytes;
use io_uring::Submitter;
use io_uring::types::BufRingEntry;

use super::buf_policy::{BufPolicy, SHRINK_INTERVAL};

/// An anonymous, page-aligned memory mapping the kernel may write to (so Rust never holds a
/// reference into it except for the instant of a copy).
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> io::Result<Self> {
        // SAFETY: anonymous private mapping with no address hint; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        Ok(Self { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.len == 0 {
            // Leaked: the kernel may still write to it.
            return;
        }
        // SAFETY: the mapping was created in `new` with this length; nothing refers to it
        // once its owner (the buffer ring, dropped after the io_uring and its operations) is
        // gone.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// The ring of entries plus the buffers it points at.
pub(crate) struct BufRing {
    entries: Mapping,
    buffers: Mapping,
    count: u16,
    buf_size: usize,
    group: u16,
    tail: u16,
    policy: BufPolicy,
    /// Buffers whose pages were handed back to the OS so far.
    released: u64,
    /// The ring may be trimmed at all (`DEFER_TASKRUN`; see [`BufRing::adjust`]).
    trims: bool,
}

impl BufRing {
    /// Allocates `count` buffers of `buf_size` bytes, offers the policy's first few and
    /// registers the ring as buffer group `group`. `trims`: the ring's task work runs only
    /// inside this thread's `io_uring_enter`, so buffers it holds may be trimmed.
    pub(crate) fn register(
        submitter: &Submitter<'_>,
        count: u16,
        buf_size: u32,
        group: u16,
        trims: bool,
    ) -> io::Result<Self> {
        let entries_len = usize::from(count) * std::mem::size_of::<BufRingEntry>();
        let mut ring = Self {
            entries: Mapping::new(entries_len)?,
            buffers: Mapping::new(usize::from(count) * buf_size as usize)?,
            count,
            buf_size: buf_size as usize,
            group,
            tail: 0,
            policy: BufPolicy::new(count, Instant::now()),
            released: 0,
            trims,
        };
        ring.refill();
        // SAFETY: the mapping is page-aligned, holds `count` entries and lives until `self`
        // is dropped, which happens only after the ring fd (and so the registration) is gone;
        // see `UringBackend`'s field order.
        unsafe {
            let ring_addr = ring.entries.ptr.as_ptr() as u64;
            submitter.register_buf_ring_with_flags(ring_addr, count, group, 0)?;
        }
        Ok(ring)
    }

    /// Keeps both mappings for the life of the process: for a teardown that could not prove
    /// the kernel is done with them.
    pub(crate) fn leak(&mut self) {
        self.entries.len = 0;
        self.buffers.len = 0;
    }

    /// The buffer group id to put in receive SQEs.
    pub(crate) fn group(&self) -> u16 {
        self.group
    }

    /// Copies the first `len` bytes of buffer `bid` out and returns the buffer to the ring.
    pub(crate) fn take(&mut self, bid: u16, len: usize) -> Bytes {
        let bid = bid & (self.count - 1);
        let len = len.min(self.buf_size);
        // SAFETY: buffer `bid` lies inside the mapping; the kernel finished writing it (its
        // completion was reaped) and does not touch it again until it is pushed back below.
        let data = unsafe {
            let start = self
                .buffers
                .ptr
                .as_ptr()
                .add(usize::from(bid) * self.buf_size);
            Bytes::copy_from_slice(std::slice::from_raw_parts(start, len))
        };
        self.policy.given_back(bid);
        self.refill();
        data
    }

    /// A receive found no buffer in the ring (`ENOBUFS`).
    pub(crate) fn ran_dry(&mut self) {
        self.policy.ran_dry();
    }

    /// Once per wait: lets the policy grow or shrink the offer and hands back to the OS the
    /// pages of the spare buffers it no longer keeps warm. True when the ring holds more than
    /// its target and should be trimmed ([`Self::trim`]); never for a ring registered without
    /// `trims` (the trim is then marked done, so an idle shard need not wake for it).
    pub(crate) fn adjust(&mut self, now: Instant) -> bool {
        let adjusted = self.policy.adjust(now);
        self.refill();
        for bid in adjusted.cold {
            self.release_pages(bid);
        }
        if adjusted.trim && !self.trims {
            self.policy.trimmed();
        }
        adjusted.trim && self.trims
    }

    /// Whether the shard should wake up within [`SHRINK_INTERVAL`] for the offer's next
    /// check (`None`: no need).
    pub(crate) fn next_check_within(&self) -> Option<std::time::Duration> {
        self.policy.wants_check().then_some(SHRINK_INTERVAL)
    }

    /// Buffers whose pages were handed back to the OS since the last call.
    pub(crate) fn take_released(&mut self) -> u64 {
        std::mem::take(&mut self.released)
    }

    /// Hands back the pages of the offered buffers beyond the target, counted from the ring's
    /// head (the kernel takes entries in order, so these are the ones it reaches last).
    ///
    /// Call it only when the kernel cannot have picked a buffer that `take` has not seen:
    /// every completion reaped and handled, none overflowed, on a ring whose receives run only
    /// inside this thread's `io_uring_enter` (`DEFER_TASKRUN`, the registration's `trims`).
    /// Then the buffers in the ring are exactly the last `offered` entries before the tail,
    /// and none of them can be written before the next enter, which comes after the `madvise`.
    pub(crate) fn trim(&mut self) {
        self.release_offered_from(self.policy.target());
        self.policy.trimmed();
    }

    /// For a shard gone quiet: hands back the pages of every buffer that holds some, the spare
    /// ones and, when `settled` (the rule of [`Self::trim`], which a ring registered without
    /// `trims` never meets), the ones in the ring. The next receives fault in zeroed pages:
    /// a few page faults once a quiet spell ends, against the pages of up to twice the target
    /// that an idle shard held for as long as it stayed idle. Like [`Self::trim`], it rests on
    /// the kernel picking buffers only inside this thread's enter; the trim reaches only the
    /// buffers the kernel would take last, this one the ring's head too.
    pub(crate) fn release_every_buffer(&mut self, settled: bool) {
        for bid in self.policy.cool_every_spare() {
            self.release_pages(bid);
        }
        if settled && self.trims {
            self.release_offered_from(0);
            self.policy.trimmed();
        }
    }

    /// Buffers that may hold pages now.
    pub(crate) fn warm_count(&self) -> u16 {
        self.policy.warm_count()
    }

    /// Hands back the pages of the warm offered buffers from ring position `first` (counted
    /// from the ring's head) to the tail; the caller has checked the rule of [`Self::trim`].
    fn release_offered_from(&mut self, first: u16) {
        let offered = self.policy.offered();
        let head = self.tail.wrapping_sub(offered);
        for position in first..offered {
            let bid = self.entry_bid(head.wrapping_add(position));
            if self.policy.cool(bid) {
                self.release_pages(bid);
            }
        }
    }

    /// The buffer id written at ring position `position`.
    fn entry_bid(&self, position: u16) -> u16 {
        let index = usize::from(position & (self.count - 1));
        let base = self.entries.ptr.as_ptr().cast::<BufRingEntry>();
        // SAFETY: `index` < `count`, so the entry lies inside the mapping; entries are written
        // only by `push` on this thread, and the kernel only reads them.
        let entry = unsafe { &*base.add(index) };
        entry.bid()
    }

    /// Offers buffers until the policy's target is reached, and publishes them.
    fn refill(&mut self) {
        let mut pushed = false;
        while let Some(bid) = self.policy.next_to_offer() {
            self.push(bid);
            pushed = true;
        }
        if pushed {
            self.publish();
        }
    }

    /// Hands back to the OS the whole pages inside buffer `bid` (a page shared with a
    /// neighbour is kept). The caller ensures nothing is written to it or read from it now:
    /// it is spare, or it is in the ring and the kernel provably has not picked it.
    fn release_pages(&mut self, bid: u16) {
        let page = page_size();
        let start = self.buffers.ptr.as_ptr() as usize + usize::from(bid) * self.buf_size;
        let first = start.next_multiple_of(page);
        let end = (start + self.buf_size) / page * page;
        if end <= first {
            return;
        }
        // SAFETY: `first..end` lies inside buffer `bid` of the mapping, which nobody reads or
        // writes now (the caller's rule above: its bytes were copied out in `take`, and the
        // kernel is not writing it). MADV_DONTNEED on private anonymous memory only drops the
        // pages; the next write, the kernel's included, faults in zeroed ones. A failure leaves
        // the pages in place, which is harmless.
        let failed =
            unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_DONTNEED) }
                != 0;
        if !failed {
            self.released += 1;
        }
    }

    /// Writes the entry for `bid` at the local tail.
    fn push(&mut self, bid: u16) {
        let index = usize::from(self.tail & (self.count - 1));
        let addr = self.buffers.ptr.as_ptr() as u64 + (usize::from(bid) * self.buf_size) as u64;
        let base = self.entries.ptr.as_ptr().cast::<BufRingEntry>();
        // SAFETY: `index` < `count`, so the entry lies inside the mapping; the kernel reads
        // entries only between its head and the published tail, and this one is beyond it.
        let entry = unsafe { &mut *base.add(index) };
        entry.set_addr(addr);
        entry.set_len(self.buf_size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the pushed entries visible to the kernel (release store of the shared tail).
    fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's reserved field of the mapping,
        // which is u16-aligned; the kernel only reads it.
        let tail = unsafe {
            &*BufRingEntry::tail(self.entries.ptr.as_ptr().cast::<BufRingEntry>())
                .cast::<AtomicU16>()
        };
        tail.store(self.tail, Ordering::Release);
    }
}

/// The system's page size (4 KiB where it cannot be read).
fn page_size() -> usize {
    // SAFETY: sysconf only reads a system value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|size| *size > 0)
        .unwrap_or(4096)
}
