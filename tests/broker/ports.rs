//! Loopback ports for the servers a test starts on a port it chooses (redis-server,
//! nats-server, the `ringmq` binary) or leaves unused (a backend that is down).
//!
//! A port found with `bind(0)` and released for a server to bind is back in the kernel's
//! ephemeral range: until the server binds it, another test's `bind(0)` or outgoing connection
//! may take it, or another test may be handed the same port and start its server there; one
//! test then talks to the other's server, which is gone when that test ends (seen in CI as a
//! redis-server connection reset). The ports here come from just below the ephemeral range,
//! which the kernel never hands out by itself, from one counter per test process (no two tests
//! get one port), each checked free by a bind; processes start at different places.
//!
//! Shared by the `ringmq` library's unit tests and the `broker` integration tests.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many ports just outside the ephemeral range are used.
const SPAN: u64 = 8_000;
/// The lowest port used (below it: well-known and privileged ports).
const LOWEST: u64 = 1_024;
/// Linux's default ephemeral range, if `/proc` cannot be read.
const DEFAULT_EPHEMERAL: (u64, u64) = (32_768, 60_999);

/// A loopback port free now, outside the kernel's ephemeral range, not handed out before by
/// this process.
pub fn free_port() -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let (low, span) = usable_range();
    let start = u64::from(std::process::id()).wrapping_mul(7_919) % span;
    for _ in 0..span {
        let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let Ok(port) = u16::try_from(low + offset) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port outside the ephemeral range ({low}, {span} ports)");
}

/// (first port, number of ports): [`SPAN`] ports just below the ephemeral range, or just
/// above it when it starts too low to leave room below.
fn usable_range() -> (u64, u64) {
    let (ephemeral_low, ephemeral_high) = ephemeral_range();
    if ephemeral_low >= LOWEST + SPAN {
        return (ephemeral_low - SPAN, SPAN);
    }
    let above = 65_535u64.saturating_sub(ephemeral_high).min(SPAN);
    assert!(
        above > 0,
        "the ephemeral port range {ephemeral_low}-{ephemeral_high} leaves no ports for test servers"
    );
    (ephemeral_high + 1, above)
}

/// The kernel's ephemeral port range (`/proc/sys/net/ipv4/ip_local_port_range`).
fn ephemeral_range() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range");
    let parsed = text.ok().and_then(|text| {
        let mut bounds = text.split_whitespace().map(str::parse::<u64>);
        Some((bounds.next()?.ok()?, bounds.next()?.ok()?))
    });
    parsed.unwrap_or(DEFAULT_EPHEMERAL)
}

#[test]
fn ports_are_outside_the_ephemeral_range_and_never_handed_out_twice() {
    let (low, high) = ephemeral_range();
    let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
    for port in &ports {
        let port = u64::from(*port);
        assert!(port >= LOWEST && !(low..=high).contains(&port), "{port}");
    }
    let mut unique = ports.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ports.len(), "{ports:?}");
}
