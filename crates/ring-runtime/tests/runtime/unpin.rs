//! A pinned shard whose core another busy thread holds unpins itself
//! (`RuntimeConfig::unpin_when_shared`): its affinity widens to every core the process may use.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ring_runtime::{ConnId, Handler, ShardCtx, TimerId};

use crate::common;

/// The calling thread's allowed cores, as the kernel lists them (`Cpus_allowed_list`).
fn allowed_cores_listed() -> String {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_owned()
}

/// Cores the test process may use (its main thread's mask is the process's).
fn process_cores() -> Vec<usize> {
    // SAFETY: all-zero is a valid empty cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed; pid 0 is the calling thread.
    let ret =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(ret, 0);
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: every index is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Raises the calling thread's priority to nice -20 (Linux: `setpriority` with `PRIO_PROCESS`
/// and 0 names the calling thread); `false` where that is not permitted (no root, no
/// `CAP_SYS_NICE`).
fn raise_this_threads_priority() -> bool {
    // SAFETY: plain system call on the calling thread; no pointers.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -20) == 0 }
}

fn pin_this_thread(core: usize) {
    // SAFETY: all-zero is a valid empty cpu_set_t.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `core` comes from the process's own mask, so it is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(core, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let ret = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(ret, 0);
}

/// Wakes every millisecond (a timer) and reports the shard thread's allowed cores.
struct Ticker {
    seen: Arc<Mutex<String>>,
}

impl Handler for Ticker {
    type Message = ();

    fn on_accept(&mut self, ctx: &mut ShardCtx<()>, _conn: ConnId, _peer: SocketAddr) {
        ctx.arm_timer(Duration::from_millis(1), 0);
    }

    fn on_data(&mut self, _ctx: &mut ShardCtx<()>, _conn: ConnId, _data: Bytes) {}

    fn on_timer(&mut self, ctx: &mut ShardCtx<()>, _timer: TimerId, _key: u64) {
        *self.seen.lock().unwrap() = allowed_cores_listed();
        ctx.arm_timer(Duration::from_millis(1), 0);
    }
}

#[test]
fn a_pinned_shard_whose_core_is_held_by_a_busy_thread_unpins_itself() {
    let cores = process_cores();
    if cores.len() < 2 {
        common::skip(&"one core only: nowhere to unpin to");
        return;
    }
    let seen = Arc::new(Mutex::new(String::new()));
    let config = ring_runtime::RuntimeConfig {
        pin_threads: true,
        unpin_when_shared: true,
        ..common::config(1)
    };
    let shared = Arc::clone(&seen);
    let Some(handle) = common::start(config, move |_| Ticker {
        seen: Arc::clone(&shared),
    }) else {
        return;
    };
    let _client = common::client(handle.local_addrs()[0]);
    let pinned_to = cores[0].to_string();
    common::wait_until("the shard's first tick", || {
        *seen.lock().unwrap() == pinned_to
    });
    // A thread that never sleeps, on the shard's core, at nice -20 (the shard at nice 0 then
    // gets about 1 % of that core: it waits for it whatever the kernel's wake-up preemption
    // does; at equal priority the waits are the kernel's choice, too few in some runs), until
    // the shard has moved off it.
    let moved = Arc::new(AtomicBool::new(false));
    let (raised_tx, raised_rx) = std::sync::mpsc::channel();
    let hog = {
        let moved = Arc::clone(&moved);
        let core = cores[0];
        std::thread::spawn(move || {
            pin_this_thread(core);
            let raised = raise_this_threads_priority();
            raised_tx.send(raised).unwrap();
            let mut spins = 0u64;
            while raised && !moved.load(Ordering::Relaxed) {
                spins = std::hint::black_box(spins.wrapping_add(1));
            }
        })
    };
    if !raised_rx.recv().unwrap() {
        hog.join().unwrap();
        common::skip(&"a thread at nice -20 needs root or CAP_SYS_NICE");
        handle.shutdown();
        handle.join().unwrap();
        return;
    }
    // The test's own thread has the process's whole mask: the list to expect.
    let everywhere = allowed_cores_listed();
    common::wait_until("the shard to unpin itself", || {
        *seen.lock().unwrap() == everywhere
    });
    moved.store(true, Ordering::Relaxed);
    hog.join().unwrap();
    handle.shutdown();
    handle.join().unwrap();
}
