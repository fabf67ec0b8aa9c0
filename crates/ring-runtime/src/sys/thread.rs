//! Thread placement and process limits.

use std::io;

use super::cvt;

/// Pins the calling thread to `core` (`sched_setaffinity`).
pub(crate) fn pin_current_thread(core: usize) -> io::Result<()> {
    set_current_affinity(&[core])
}

/// Lets the calling thread run on any of `cores` (`sched_setaffinity`).
pub(crate) fn set_current_affinity(cores: &[usize]) -> io::Result<()> {
    if cores.iter().any(|&core| core >= libc::CPU_SETSIZE as usize) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "core index too large",
        ));
    }
    // SAFETY: cpu_set_t is a plain bitmask; all-zero is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &core in cores {
        // SAFETY: every `core` < CPU_SETSIZE was checked above, so CPU_SET stays inside `set`.
        unsafe { libc::CPU_SET(core, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    cvt(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })?;
    Ok(())
}

/// How long the calling thread has waited, runnable, for a CPU since it started: the second
/// field of `/proc/thread-self/schedstat`, in nanoseconds. `None` where the kernel does not
/// keep it (no schedstats) or the file cannot be read (qemu-user, a hardened /proc).
pub(crate) fn run_delay() -> Option<std::time::Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(std::time::Duration::from_nanos(nanos))
}

/// Cores in the calling thread's affinity mask, in ascending order.
pub(crate) fn allowed_cores() -> Vec<usize> {
    // SAFETY: all-zero is a valid empty cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed.
    let ret =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if ret != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: every index is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// The type of `getrlimit`'s resource argument differs between glibc and musl.
#[cfg(target_env = "gnu")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_env = "gnu"))]
type Resource = libc::c_int;

fn get_rlimit(resource: Resource) -> io::Result<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit.
    cvt(unsafe { libc::getrlimit(resource, &mut limit) })?;
    Ok(limit)
}

/// The soft `RLIMIT_MEMLOCK` in bytes.
pub(crate) fn memlock_limit() -> u64 {
    get_rlimit(libc::RLIMIT_MEMLOCK).map_or(0, |limit| limit.rlim_cur)
}

/// Raises the soft `RLIMIT_NOFILE` to `want` (capped at the hard limit); returns the new soft
/// limit.
pub fn raise_fd_limit(want: u64) -> io::Result<u64> {
    let mut limit = get_rlimit(libc::RLIMIT_NOFILE)?;
    let target = want.min(limit.rlim_max as u64);
    if (limit.rlim_cur as u64) < target {
        limit.rlim_cur = target as libc::rlim_t;
        // SAFETY: `limit` is a valid rlimit with cur <= max.
        cvt(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) })?;
    }
    Ok(limit.rlim_cur as u64)
}
