use super::*;

const TICK: Duration = Duration::from_millis(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Deterministic xorshift for reproducible random schedules.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn fires_at_or_after_deadline_in_order_of_ticks() {
    let origin = Instant::now();
    let mut wheel = TimerWheel::new(origin, TICK);
    wheel.insert(origin + ms(5), "five");
    wheel.insert(origin + ms(70), "seventy");
    wheel.insert(origin + ms(1), "one");
    let mut fired = Vec::new();
    wheel.advance(origin + ms(4), &mut fired);
    assert_eq!(fired.iter().map(|f| f.1).collect::<Vec<_>>(), vec!["one"]);
    fired.clear();
    wheel.advance(origin + ms(69), &mut fired);
    assert_eq!(fired.iter().map(|f| f.1).collect::<Vec<_>>(), vec!["five"]);
    fired.clear();
    assert_eq!(wheel.next_deadline(), Some(origin + ms(70)));
    wheel.advance(origin + ms(70), &mut fired);
    assert_eq!(
        fired.iter().map(|f| f.1).collect::<Vec<_>>(),
        vec!["seventy"]
    );
    assert_eq!(wheel.len(), 0);
    assert_eq!(wheel.next_deadline(), None);
}

/// A shard that wakes long after several deadlines (a stall) fires them in deadline order,
/// whatever their levels, slots and the order they were armed or moved in.
#[test]
fn a_late_advance_fires_in_deadline_order() {
    let origin = Instant::now();
    let mut wheel = TimerWheel::new(origin, TICK);
    wheel.insert(origin + ms(20), 20);
    let moved = wheel.insert(origin + ms(10), 40);
    assert!(wheel.reset(moved, origin + ms(40)));
    wheel.insert(origin + ms(3000), 3000);
    wheel.insert(origin + ms(0), 0);
    wheel.insert(origin + ms(70), 70);
    wheel.insert(origin + ms(5), 5);
    let mut fired = Vec::new();
    wheel.advance(origin + ms(5000), &mut fired);
    let order: Vec<i32> = fired.iter().map(|f| f.1).collect();
    assert_eq!(order, vec![0, 5, 20, 40, 70, 3000]);
}

#[test]
fn cancel_and_reset_are_honoured() {
    let origin = Instant::now();
    let mut wheel = TimerWheel::new(origin, TICK);
    let a = wheel.insert(origin + ms(10), 'a');
    let b = wheel.insert(origin + ms(10), 'b');
    assert_eq!(wheel.cancel(a), Some('a'));
    assert_eq!(wheel.cancel(a), None, "second cancel is a no-op");
    assert!(wheel.reset(b, origin + ms(5000)));
    let mut fired = Vec::new();
    wheel.advance(origin + ms(4999), &mut fired);
    assert!(fired.is_empty());
    wheel.advance(origin + ms(5000), &mut fired);
    assert_eq!(fired, vec![(b, 'b')]);
    assert!(!wheel.reset(b, origin + ms(1)), "fired ids are stale");
}

#[test]
fn past_deadlines_fire_on_next_advance() {
    let origin = Instant::now();
    let mut wheel = TimerWheel::new(origin, TICK);
    let mut fired = Vec::new();
    wheel.advance(origin + ms(100), &mut fired);
    wheel.insert(origin + ms(3), 1);
    assert_eq!(wheel.next_deadline(), Some(origin + ms(100)));
    wheel.advance(origin + ms(100), &mut fired);
    assert_eq!(fired.len(), 1);
}

#[test]
fn far_deadlines_beyond_wheel_range_still_fire() {
    let origin = Instant::now();
    let tick = Duration::from_micros(1);
    let mut wheel = TimerWheel::new(origin, tick);
    let far = origin + tick * (MAX_TICKS as u32) * 3;
    wheel.insert(far, ());
    let mut fired = Vec::new();
    let mut now = origin;
    while fired.is_empty() {
        let next = wheel.next_deadline().expect("timer armed");
        assert!(next <= far, "never wakes after the deadline");
        now = next.max(now);
        wheel.advance(now, &mut fired);
    }
    assert!(now >= far);
}

/// Random schedule against a naive model: every timer fires exactly once, never early, and at
/// the first advance at or after its deadline tick.
#[test]
fn matches_naive_model_on_random_schedule() {
    let origin = Instant::now();
    let mut wheel = TimerWheel::new(origin, TICK);
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut model: Vec<(TimerId, u64)> = Vec::new();
    let mut now = 0u64;
    let mut fired = Vec::new();
    for step in 0..4000u64 {
        let delay = match rng.next() % 4 {
            0 => rng.next() % 64,
            1 => rng.next() % 5000,
            2 => rng.next() % 300_000,
            _ => rng.next() % 20_000_000,
        };
        let id = wheel.insert(origin + ms(now + delay), step);
        model.push((id, now + delay));
        if rng.next().is_multiple_of(5) {
            let victim = (rng.next() % model.len() as u64) as usize;
            let (id, _) = model.swap_remove(victim);
            assert!(wheel.cancel(id).is_some());
        }
        if rng.next().is_multiple_of(7) {
            let target = (rng.next() % model.len() as u64) as usize;
            let when = now + rng.next() % 100_000;
            assert!(wheel.reset(model[target].0, origin + ms(when)));
            model[target].1 = when;
        }
        now += rng.next() % 2000;
        check_advance(&mut wheel, &mut model, &mut fired, origin, now);
    }
    now += 30_000_000;
    check_advance(&mut wheel, &mut model, &mut fired, origin, now);
    assert!(model.is_empty());
    assert_eq!(wheel.len(), 0);
}

fn check_advance(
    wheel: &mut TimerWheel<u64>,
    model: &mut Vec<(TimerId, u64)>,
    fired: &mut Vec<(TimerId, u64)>,
    origin: Instant,
    now: u64,
) {
    if let Some(next) = wheel.next_deadline() {
        let earliest = model.iter().map(|m| m.1).min().expect("model not empty");
        assert!(
            next <= origin + ms(earliest),
            "wakes no later than the earliest"
        );
    }
    fired.clear();
    wheel.advance(origin + ms(now), fired);
    let deadline_of = |id: &TimerId| model.iter().find(|m| m.0 == *id).map(|m| m.1);
    let deadlines: Vec<Option<u64>> = fired.iter().map(|f| deadline_of(&f.0)).collect();
    assert!(
        deadlines.is_sorted(),
        "fired in deadline order: {deadlines:?}"
    );
    let mut expected: Vec<TimerId> = model.iter().filter(|m| m.1 <= now).map(|m| m.0).collect();
    model.retain(|m| m.1 > now);
    let mut got: Vec<TimerId> = fired.iter().map(|f| f.0).collect();
    expected.sort_by_key(|id| (id.index(), id.generation()));
    got.sort_by_key(|id| (id.index(), id.generation()));
    assert_eq!(got, expected);
}

#[test]
fn entry_packs_deadline_and_list() {
    let mut entry = Entry {
        payload: 7u64,
        packed: DUE as u64,
        prev: NIL,
        next: NIL,
    };
    entry.set_when(123_456_789);
    assert_eq!((entry.when(), entry.list()), (123_456_789, DUE));
    entry.set_list(5);
    assert_eq!((entry.when(), entry.list()), (123_456_789, 5));
    entry.set_when(u64::MAX / 2);
    assert_eq!((entry.when(), entry.list()), (MAX_WHEN, 5));
    assert_eq!(std::mem::size_of::<Entry<u64>>(), 24);
}
