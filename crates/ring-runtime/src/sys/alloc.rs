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

#[cfg(feature = "mimalloc")]
unsafe extern "C" {
    /// mimalloc's `void mi_collect(bool force)` (declared here: libmimalloc-sys exposes it only
    /// with its `extended` feature, whose extra dependency the workspace does not carry).
    fn mi_collect(force: bool);
}

#[cfg(feature = "mimalloc")]
use libmimalloc_sys as _;

#[cfg(test)]
mod tests {
    #[test]
    fn returning_free_memory_is_harmless_at_any_time() {
        let big = vec![1u8; 8 << 20];
        drop(big);
        super::return_free_memory();
        super::return_free_memory();
    }
}
