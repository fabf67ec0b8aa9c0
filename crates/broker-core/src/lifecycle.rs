//! Connection lifecycle lines (`client connected`, `client disconnected`) at info level,
//! bounded broker-wide by `log.max_lifecycle_per_sec` per kind: a connection storm cannot
//! flood the log. Lines beyond the bound are counted, and the count is written in one
//! summary line about a second later (the shard that suppressed the first one arms a timer).
//!
//! A shard asks [`LifecycleLog::admit`] only when info lines of [`TARGET`] are enabled, and
//! formats nothing for a line that is not admitted.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// The target of every lifecycle line, so operators can filter them alone
/// (`RUST_LOG=info,ringmq::lifecycle=off`).
pub const TARGET: &str = "ringmq::lifecycle";

/// A kind of lifecycle line; each kind has its own bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// A CONNECT was accepted (CONNACK sent).
    Connected,
    /// A connected client's connection closed.
    Disconnected,
    /// A socket was refused at accept (`connection.max_connections`): one warn line each,
    /// bounded like the others, so a connection flood cannot flood the log.
    RefusedAtMax,
    /// A TLS client certificate refused for a cause the operator can fix
    /// (`transport::CertificateRefusal`): one warn line each, bounded like the others, since
    /// anyone can send such a certificate.
    CertificateRefused,
}

impl Lifecycle {
    /// The kind's name in summary lines.
    pub fn name(self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Disconnected => "disconnected",
            Self::RefusedAtMax => "refused at max_connections",
            Self::CertificateRefused => "client certificate refused",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Connected => 0,
            Self::Disconnected => 1,
            Self::RefusedAtMax => 2,
            Self::CertificateRefused => 3,
        }
    }
}

/// What to do with one lifecycle line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Write it.
    Log,
    /// Over this second's bound: it was counted. `first`: the first one counted since the
    /// last summary, so the caller arms the summary.
    Suppressed { first: bool },
    /// Lifecycle lines are off (`log.max_lifecycle_per_sec = 0`): neither written nor counted.
    Off,
}

/// One kind's current second.
#[derive(Debug, Default)]
struct Window {
    /// The second (since the broker started) being counted.
    second: AtomicU64,
    /// Lines admitted or refused in it.
    count: AtomicU64,
    /// Lines refused since the last summary.
    suppressed: AtomicU64,
}

/// The broker-wide bound on lifecycle lines, shared by every shard.
#[derive(Debug, Default)]
pub struct LifecycleLog {
    per_sec: AtomicU32,
    windows: [Window; 4],
}

impl LifecycleLog {
    /// At most `per_sec` lines of each kind per second (0: none).
    pub fn new(per_sec: u32) -> Self {
        let log = Self::default();
        log.set_limit(per_sec);
        log
    }

    /// Puts a new bound in force (SIGHUP).
    pub fn set_limit(&self, per_sec: u32) {
        self.per_sec.store(per_sec, Relaxed);
    }

    /// The bound in force.
    pub fn limit(&self) -> u32 {
        self.per_sec.load(Relaxed)
    }

    /// Whether a line of `kind` in `second` (since the broker started) is written.
    pub fn admit(&self, kind: Lifecycle, second: u64) -> Admit {
        let limit = u64::from(self.limit());
        if limit == 0 {
            return Admit::Off;
        }
        let window = &self.windows[kind.index()];
        let current = window.second.load(Relaxed);
        if current != second
            && window
                .second
                .compare_exchange(current, second, Relaxed, Relaxed)
                .is_ok()
        {
            window.count.store(0, Relaxed);
        }
        if window.count.fetch_add(1, Relaxed) < limit {
            return Admit::Log;
        }
        let before = window.suppressed.fetch_add(1, Relaxed);
        Admit::Suppressed { first: before == 0 }
    }

    /// Lines of `kind` refused since the last call (the count starts again at 0).
    pub fn take_suppressed(&self, kind: Lifecycle) -> u64 {
        self.windows[kind.index()].suppressed.swap(0, Relaxed)
    }

    /// Writes the summary of the lines of `kind` refused since the last one, if any.
    pub fn summarise(&self, kind: Lifecycle) {
        let suppressed = self.take_suppressed(kind);
        if suppressed > 0 {
            tracing::info!(
                target: TARGET,
                kind = kind.name(),
                suppressed,
                max_lifecycle_per_sec = self.limit(),
                "lifecycle lines suppressed (log.max_lifecycle_per_sec)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_beyond_the_bound_are_counted_until_the_next_second() {
        let log = LifecycleLog::new(2);
        let kind = Lifecycle::Connected;
        assert_eq!(log.admit(kind, 0), Admit::Log);
        assert_eq!(log.admit(kind, 0), Admit::Log);
        assert_eq!(log.admit(kind, 0), Admit::Suppressed { first: true });
        assert_eq!(log.admit(kind, 0), Admit::Suppressed { first: false });
        assert_eq!(log.admit(kind, 1), Admit::Log, "a new second starts again");
        assert_eq!(log.take_suppressed(kind), 2);
        assert_eq!(log.take_suppressed(kind), 0);
    }

    #[test]
    fn kinds_are_bounded_apart() {
        let log = LifecycleLog::new(1);
        assert_eq!(log.admit(Lifecycle::Connected, 5), Admit::Log);
        assert_eq!(log.admit(Lifecycle::Disconnected, 5), Admit::Log);
        assert!(matches!(
            log.admit(Lifecycle::Disconnected, 5),
            Admit::Suppressed { .. }
        ));
    }

    #[test]
    fn zero_turns_them_off_and_a_new_bound_applies_at_once() {
        let log = LifecycleLog::new(0);
        assert_eq!(log.admit(Lifecycle::Connected, 0), Admit::Off);
        log.set_limit(1);
        assert_eq!(log.admit(Lifecycle::Connected, 0), Admit::Log);
        assert_eq!(log.take_suppressed(Lifecycle::Connected), 0);
    }
}
