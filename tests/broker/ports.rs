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
//! When the ephemeral range leaves no room outside it (fewer than [`SPAN`] ports below it and
//! none above, as after `sysctl -w net.ipv4.ip_local_port_range="1024 65535"` for load tests),
//! the ports come from inside the range instead, the same way: the same per-process counter
//! from a per-process start, each port checked free by a bind. One race remains there: the
//! kernel may hand such a port to an outgoing connection or a `bind(0)` between our check and
//! the server's own bind, and the server then fails to start. With the whole range of about
//! 64,000 ports to pick from that is rare, and no two tests of one process share a port.
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

/// The ports [`free_port`] picks from: `span` ports from `low`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pool {
    low: u64,
    span: u64,
    /// The ports are inside the ephemeral range: it left no room outside it.
    inside: bool,
}

/// A loopback port free now (checked by a bind), not handed out before by this process:
/// outside the kernel's ephemeral range when the range leaves room for it, else inside it
/// (see the module docs for the race that leaves).
pub fn free_port() -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let Pool { low, span, inside } = pool();
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
    let place = if inside { "inside" } else { "outside" };
    panic!("no free loopback port {place} the ephemeral range ({low}, {span} ports)");
}

/// The ports to use: [`SPAN`] just below the ephemeral range, or just above it when it starts
/// too low to leave room below; when neither side has room, the range itself.
fn pool() -> Pool {
    pool_for(ephemeral_range())
}

fn pool_for((ephemeral_low, ephemeral_high): (u64, u64)) -> Pool {
    if ephemeral_low >= LOWEST + SPAN {
        return Pool {
            low: ephemeral_low - SPAN,
            span: SPAN,
            inside: false,
        };
    }
    let above = 65_535u64.saturating_sub(ephemeral_high).min(SPAN);
    if above > 0 {
        return Pool {
            low: ephemeral_high + 1,
            span: above,
            inside: false,
        };
    }
    let low = ephemeral_low.max(LOWEST);
    let high = ephemeral_high.min(65_535);
    assert!(
        low <= high,
        "the ephemeral port range {ephemeral_low}-{ephemeral_high} is empty"
    );
    Pool {
        low,
        span: high - low + 1,
        inside: true,
    }
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

/// Outside the ephemeral range when it leaves room; otherwise inside it, and each port could be
/// bound when handed out. Never the same port twice in one process, either way.
#[test]
fn ports_are_outside_the_ephemeral_range_when_it_leaves_room_and_never_handed_out_twice() {
    let (low, high) = ephemeral_range();
    let pool = pool();
    let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
    for &port in &ports {
        let wide = u64::from(port);
        assert!(
            wide >= LOWEST && (pool.low..pool.low + pool.span).contains(&wide),
            "{port}"
        );
        if pool.inside {
            let bound = TcpListener::bind(("127.0.0.1", port));
            assert!(bound.is_ok(), "{port} cannot be bound (range {low}-{high})");
        } else {
            assert!(!(low..=high).contains(&wide), "{port} is in {low}-{high}");
        }
    }
    let mut unique = ports.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ports.len(), "{ports:?}");
}

/// Which ports each kind of range leaves, whatever this machine's range is.
#[test]
fn the_pool_falls_back_inside_the_range_only_when_it_leaves_no_room_outside() {
    let outside = |low, span| Pool {
        low,
        span,
        inside: false,
    };
    assert_eq!(pool_for((32_768, 60_999)), outside(24_768, SPAN));
    assert_eq!(pool_for((2_000, 60_000)), outside(60_001, 5_535));
    assert_eq!(
        pool_for((1_024, 65_535)),
        Pool {
            low: 1_024,
            span: 64_512,
            inside: true
        }
    );
    assert_eq!(
        pool_for((500, 65_535)),
        Pool {
            low: 1_024,
            span: 64_512,
            inside: true
        }
    );
    assert_eq!(pool_for((9_024, 65_535)), outside(1_024, SPAN));
    assert_eq!(
        pool_for((9_023, 65_535)),
        Pool {
            low: 9_023,
            span: 56_513,
            inside: true
        }
    );
}
