//! The calling thread's CPU time, for the shard's load gauge (`shard/load.rs`).

use std::time::Duration;

/// CPU time (user and system) the calling thread has used so far, kernel work it caused in
/// its own system calls included (`CLOCK_THREAD_CPUTIME_ID`); `None` if the clock cannot be
/// read.
pub(crate) fn thread_cpu_time() -> Option<Duration> {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `time` is a valid, writable timespec; the clock id is a constant of the ABI.
    let ret = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    if ret != 0 {
        return None;
    }
    let secs = u64::try_from(time.tv_sec).ok()?;
    let nanos = u32::try_from(time.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::thread_cpu_time;

    #[test]
    fn the_thread_clock_reads_and_never_goes_back() {
        let first = thread_cpu_time().expect("CLOCK_THREAD_CPUTIME_ID is readable");
        let mut spin = 0u64;
        for i in 0..100_000u64 {
            spin = std::hint::black_box(spin.wrapping_add(i));
        }
        let second = thread_cpu_time().expect("readable twice");
        assert!(second >= first, "{second:?} before {first:?}");
    }
}
