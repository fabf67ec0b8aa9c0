//! CPU time of a process, for the benchmarks (shared with zerocopy_bench).

use std::time::Duration;

/// Total on-CPU time of every thread of process `pid` (`"self"` for this one), from
/// `/proc/<pid>/task/*/schedstat` (nanoseconds).
pub fn process_cpu(pid: &str) -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path().join("schedstat");
        if let Ok(text) = std::fs::read_to_string(path) {
            total += text
                .split_whitespace()
                .next()
                .unwrap_or("0")
                .parse::<u64>()
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(total)
}
