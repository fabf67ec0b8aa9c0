//! The scheduler slice a shard thread asks for (`sched_setattr(2)`).
//!
//! Since Linux 6.12 the fair scheduler (EEVDF) lets a `SCHED_OTHER` thread ask for a shorter
//! slice through `sched_attr.sched_runtime`, and a woken thread whose slice is shorter than the
//! running one's preempts it at once. Without it, a shard woken by a client's packet waits for
//! whatever runs on its core to use up its slice (1.4 ms on a two-core machine): the tail of a
//! lightly loaded broker's latency on a shared machine. Older kernels accept the attribute and
//! ignore it; reading it back tells the two apart.

use std::io;
use std::time::Duration;

/// `SCHED_OTHER` and `SCHED_BATCH`: the fair policies, whose slice this sets.
const FAIR_POLICIES: [u32; 2] = [libc::SCHED_OTHER as u32, libc::SCHED_BATCH as u32];
/// `SCHED_FLAG_RESET_ON_FORK`, the one flag of the thread's own that is carried over.
const RESET_ON_FORK: u64 = 0x01;

/// `struct sched_attr`, first version (56 bytes), as the kernel reads and writes it.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    /// For a fair policy: the slice requested, in nanoseconds (0: the kernel's default).
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

const ATTR_SIZE: u32 = std::mem::size_of::<SchedAttr>() as u32;

/// What asking for a slice did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SliceOutcome {
    /// The thread now runs with this slice (the kernel clamps to 0.1..=100 ms).
    Applied(Duration),
    /// The kernel took the request but keeps its own slice (before Linux 6.12).
    Ignored,
    /// The thread runs under a real-time or deadline policy someone chose; left alone.
    NotFair,
}

fn get_attr() -> io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    // SAFETY: `attr` is a writable `sched_attr` of the size passed; tid 0 is the calling
    // thread, flags must be 0.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            ATTR_SIZE,
            0,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(attr)
}

fn set_attr(attr: &SchedAttr) -> io::Result<()> {
    // SAFETY: `attr` is a valid `sched_attr` whose `size` field names its size; tid 0 is the
    // calling thread, flags must be 0. The kernel only reads it.
    let ret = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, attr as *const SchedAttr, 0) };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks for `slice` as the calling thread's scheduler slice, keeping its policy, nice value
/// and reset-on-fork flag. A thread under a real-time or deadline policy is left as it is.
pub(crate) fn request_slice(slice: Duration) -> io::Result<SliceOutcome> {
    let current = get_attr()?;
    if !FAIR_POLICIES.contains(&current.policy) {
        return Ok(SliceOutcome::NotFair);
    }
    let wanted = u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX).max(1);
    set_attr(&SchedAttr {
        size: ATTR_SIZE,
        policy: current.policy,
        flags: current.flags & RESET_ON_FORK,
        nice: current.nice,
        runtime: wanted,
        ..SchedAttr::default()
    })?;
    // Since 6.12 a fair thread's `sched_runtime` reads back as its slice; before, as 0.
    let now = get_attr()?;
    Ok(match now.runtime {
        0 => SliceOutcome::Ignored,
        applied => SliceOutcome::Applied(Duration::from_nanos(applied)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's own account of the calling thread's slice, where it gives one.
    fn proc_slice() -> Option<u64> {
        let text = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
        let line = text.lines().find(|l| l.starts_with("se.slice"))?;
        line.split(':').nth(1)?.trim().parse().ok()
    }

    /// Whether the running kernel has custom slices (Linux 6.12 or later).
    fn kernel_has_custom_slices() -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut parts = release
            .trim()
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().ok());
        match (parts.next().flatten(), parts.next().flatten()) {
            (Some(major), Some(minor)) => (major, minor) >= (6, 12),
            _ => false,
        }
    }

    /// Whether the scheduler attributes cannot be read (qemu-user, which runs the aarch64
    /// tests, does not implement the calls): then asking fails with `ENOSYS` and that is all.
    fn no_sched_attr_calls(asked: &io::Result<SliceOutcome>) -> bool {
        match get_attr() {
            Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => {
                let code = asked.as_ref().err().and_then(io::Error::raw_os_error);
                assert_eq!(code, Some(libc::ENOSYS), "{asked:?}");
                true
            }
            _ => false,
        }
    }

    #[test]
    fn the_slice_is_applied_and_the_nice_value_kept() {
        // A thread of its own: the test harness's threads keep their slices.
        std::thread::spawn(|| {
            // SAFETY: setpriority on the calling thread (who 0) with a valid nice value; a
            // higher nice value needs no privilege.
            let raised = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 3) } == 0;
            let asked = request_slice(Duration::from_micros(250));
            if no_sched_attr_calls(&asked) {
                return;
            }
            match asked.expect("sched_setattr on the calling thread") {
                SliceOutcome::Applied(slice) => {
                    assert_eq!(slice, Duration::from_micros(250));
                    assert_eq!(proc_slice().unwrap_or(250_000), 250_000);
                }
                SliceOutcome::Ignored => assert!(!kernel_has_custom_slices(), "not applied"),
                SliceOutcome::NotFair => panic!("a plain thread runs under a fair policy"),
            }
            if raised {
                assert_eq!(
                    get_attr().expect("sched_getattr").nice,
                    3,
                    "nice value kept"
                );
            }
        })
        .join()
        .expect("test thread");
    }

    #[test]
    fn a_slice_beyond_the_kernels_range_is_clamped() {
        std::thread::spawn(|| {
            let asked = request_slice(Duration::from_secs(5));
            if no_sched_attr_calls(&asked) {
                return;
            }
            match asked.expect("sched_setattr on the calling thread") {
                SliceOutcome::Applied(slice) => assert_eq!(slice, Duration::from_millis(100)),
                SliceOutcome::Ignored => assert!(!kernel_has_custom_slices(), "not applied"),
                SliceOutcome::NotFair => panic!("a plain thread runs under a fair policy"),
            }
        })
        .join()
        .expect("test thread");
    }
}
