//! When a rate-limited publisher sends its first message (`--phase`).
//!
//! Under `spread` every publisher sends on a grid of its own: one message per period
//! (`1 / rate`), at a fixed offset within the period that depends only on the publisher's index,
//! counted from a clock the thread shares. The offered load then has the same shape whatever
//! the broker: spread evenly over the period, not bunched by how fast the broker acknowledged
//! the connections. Under `connack` a publisher starts one warm-up after its own CONNACK, so a
//! broker that acknowledges a thousand connections within a few milliseconds receives their
//! messages in bursts, and a slower one receives them spread out.

use std::time::{Duration, Instant};

use clap::ValueEnum;

/// How rate-limited publishers place their sends within the period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PhaseMode {
    /// A fixed offset per publisher index, the same for every broker.
    Spread,
    /// One warm-up after the publisher's own CONNACK.
    Connack,
}

/// The golden ratio's fractional part: `index * GOLDEN mod 1` spreads any number of indexes
/// evenly over the period without knowing how many there are.
const GOLDEN: f64 = 0.618_033_988_749_894_8;

/// Publisher `index`'s offset within the period, as a fraction of it (0 to 1).
pub fn offset(index: u32) -> f64 {
    (f64::from(index) * GOLDEN).fract()
}

/// The first instant at or after `earliest` on publisher `index`'s grid:
/// `origin + (k + offset(index)) / rate` for the smallest such whole `k`. `rate` is in messages
/// per second and must be positive.
pub fn first_send(origin: Instant, earliest: Instant, rate: f64, index: u32) -> Instant {
    let period = 1.0 / rate;
    let phase = offset(index) * period;
    let since_origin = earliest.saturating_duration_since(origin).as_secs_f64();
    let periods = ((since_origin - phase) / period).ceil().max(0.0);
    origin + Duration::from_secs_f64(periods * period + phase)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(instant: Instant, origin: Instant) -> f64 {
        instant.duration_since(origin).as_secs_f64()
    }

    #[test]
    fn the_first_send_is_on_the_grid_and_not_before_the_earliest() {
        let origin = Instant::now();
        for index in [0, 1, 7, 999] {
            for earliest_ms in [0, 3, 1_000, 1_049, 1_051] {
                let earliest = origin + Duration::from_millis(earliest_ms);
                let first = first_send(origin, earliest, 20.0, index);
                assert!(
                    first >= earliest,
                    "index {index}, earliest {earliest_ms} ms"
                );
                let wait = first.duration_since(earliest);
                assert!(
                    wait < Duration::from_millis(50),
                    "waits {wait:?}: over a period"
                );
                let periods = (secs(first, origin) - offset(index) / 20.0) * 20.0;
                assert!(
                    (periods - periods.round()).abs() < 1e-6,
                    "off the grid: {periods}"
                );
            }
        }
    }

    #[test]
    fn the_offset_depends_on_the_index_not_on_when_the_publisher_connected() {
        // Index 5 at 10 msg/s: 9.02 ms into each 100 ms period.
        let origin = Instant::now();
        let early = first_send(origin, origin + Duration::from_millis(1_010), 10.0, 5);
        let late = first_send(origin, origin + Duration::from_millis(1_095), 10.0, 5);
        assert_eq!(
            early, late,
            "two CONNACK times between the same two grid points"
        );
        let at = secs(early, origin);
        assert!((at - 1.109_02).abs() < 1e-4, "{at}");
        let other = first_send(origin, origin + Duration::from_millis(1_010), 10.0, 6);
        assert_ne!(early, other, "another index, another offset");
    }

    #[test]
    fn a_thousand_publishers_fill_every_tenth_of_the_period() {
        let mut per_tenth = [0u32; 10];
        for index in 0..1_000 {
            per_tenth[(offset(index) * 10.0) as usize] += 1;
        }
        for (tenth, count) in per_tenth.iter().enumerate() {
            assert!(
                (95..=105).contains(count),
                "tenth {tenth}: {count} of 1,000"
            );
        }
    }
}
