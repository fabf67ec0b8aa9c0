//! Handing freed memory back to the operating system. mimalloc keeps the pages a thread
//! allocated until that thread itself collects them: memory another thread freed (a message
//! received on one shard and dropped on another) and emptied segments waiting for their purge
//! delay stay in the process while the owning thread is idle. A shard calls
//! [`return_free_memory`] on its own thread after large amounts were freed.

/// Returns the calling thread's free allocator memory to the OS (mimalloc: `mi_collect(true)`:
/// frees pages emptied by other threads' frees and purges empty segments). Costs a walk over
/// the thread's pages: call it after large releases, not per message. Without the `mimalloc`
/// feature (the system allocator) it does nothing.
pub fn return_free_memory() {
    #[cfg(feature = "mimalloc")]
    // SAFETY: `mi_collect` takes no pointers and only touches the calling thread's heap and the
    // allocator's own shared structures, which it synchronises itself; libmimalloc-sys links it.
    unsafe {
        mi_collect(true);
    }
}

/// mimalloc's `mi_option_purge_delay` (its index in `mi_option_t`, the same in mimalloc 2 and 3).
#[cfg(feature = "mimalloc")]
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// The environment variable through which mimalloc reads its purge delay.
const PURGE_DELAY_ENV: &str = "MIMALLOC_PURGE_DELAY";

/// Keeps freed allocator pages for `delay` before the allocator hands them back to the OS by
/// itself (mimalloc's purge delay: 10 ms by default in mimalloc 2, which the broker uses; 0: at
/// once). Pages freed and used again within it cost no page fault and no zeroing by the kernel;
/// [`return_free_memory`] still hands them back at once. Call it once at start, before the threads that allocate most; a
/// `MIMALLOC_PURGE_DELAY` set in the environment wins. Whether it was applied: without the
/// `mimalloc` feature, or with that variable set, it does nothing.
pub fn hold_free_memory(delay: std::time::Duration) -> bool {
    if std::env::var_os(PURGE_DELAY_ENV).is_some() {
        return false;
    }
    set_purge_delay(delay)
}

#[cfg(feature = "mimalloc")]
fn set_purge_delay(delay: std::time::Duration) -> bool {
    let millis = std::ffi::c_long::try_from(delay.as_millis()).unwrap_or(std::ffi::c_long::MAX);
    // SAFETY: `mi_option_set` takes two integers and stores the option's value in mimalloc's
    // option table (an index it checks against its bounds); the allocator reads the value with
    // a plain load whenever it schedules a purge, so setting it while other threads allocate is
    // what mimalloc's own environment and runtime settings do too.
    unsafe {
        mi_option_set(MI_OPTION_PURGE_DELAY, millis);
    }
    true
}

#[cfg(not(feature = "mimalloc"))]
fn set_purge_delay(_delay: std::time::Duration) -> bool {
    false
}

#[cfg(feature = "mimalloc")]
unsafe extern "C" {
    /// mimalloc's `void mi_option_set(mi_option_t option, long value)`.
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);

    /// mimalloc's `void mi_collect(bool force)` (declared here: libmimalloc-sys exposes it only
    /// with its `extended` feature, whose extra dependency the workspace does not carry).
    fn mi_collect(force: bool);
}

#[cfg(feature = "mimalloc")]
use libmimalloc_sys as _;

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_applies_unless_the_environment_sets_one() {
        let env_set = std::env::var_os(super::PURGE_DELAY_ENV).is_some();
        #[cfg(feature = "mimalloc")]
        if !env_set {
            // mimalloc's default purge delay (10 ms in v2, 1 s in v3): the option index names
            // the right option.
            assert!(matches!(purge_delay(), 10 | 1000), "{}", purge_delay());
        }
        let applied = super::hold_free_memory(std::time::Duration::from_millis(250));
        assert_eq!(applied, cfg!(feature = "mimalloc") && !env_set);
        #[cfg(feature = "mimalloc")]
        if !env_set {
            assert_eq!(purge_delay(), 250);
        }
    }

    #[cfg(feature = "mimalloc")]
    fn purge_delay() -> std::ffi::c_long {
        unsafe extern "C" {
            /// mimalloc's `long mi_option_get(mi_option_t option)`.
            fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
        }
        // SAFETY: reads one entry of mimalloc's option table by an index it checks.
        unsafe { mi_option_get(super::MI_OPTION_PURGE_DELAY) }
    }

    #[test]
    fn returning_free_memory_is_harmless_at_any_time() {
        let big = vec![1u8; 8 << 20];
        drop(big);
        super::return_free_memory();
        super::return_free_memory();
    }
}
