//! The process's resident memory, for a caller that must react to it (the broker's overload
//! mode): `/proc/self/statm` counts pages, and only `sysconf` knows the page size.

use std::io;

/// The process's resident set size in bytes (`/proc/self/statm`'s second field times the page
/// size). One small read of procfs: cheap, but not for every packet.
pub fn resident_memory_bytes() -> io::Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages = parse_resident_pages(&statm)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "malformed /proc/self/statm"))?;
    Ok(pages.saturating_mul(page_size()))
}

/// The resident field (the second) of a statm line.
fn parse_resident_pages(statm: &str) -> Option<u64> {
    statm.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// The system's page size (4096 when `sysconf` cannot tell).
fn page_size() -> u64 {
    // SAFETY: `sysconf` reads a system constant; it takes no pointers and has no side effects.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resident_field_is_the_second() {
        assert_eq!(parse_resident_pages("1000 250 30 1 0 400 0\n"), Some(250));
        assert_eq!(parse_resident_pages("1000"), None);
    }

    #[test]
    fn this_process_has_some_resident_memory() {
        let rss = resident_memory_bytes().expect("procfs is mounted");
        assert!(rss > 1 << 20, "{rss} bytes resident");
    }
}
