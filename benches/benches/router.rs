//! Router microbenchmarks: match latency over large tables, subscribe/unsubscribe throughput and
//! retained lookups. Run: `cargo bench -p ringmq-benches --bench router -- --warm-up-time 1
//! --measurement-time 3`. Bytes per subscription come from `crates/router/tests/memory.rs`.
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use router::{
    Matches, Publisher, RetainedStore, SubscriberId, SubscriptionFilter, SubscriptionId,
    SubscriptionOptions, SubscriptionTable, TopicFilter, TopicName,
};

const EXACT: u32 = 1_000_000;
const WILDCARD: u32 = 100_000;
const GROUPS: u32 = 1_000;
const MEMBERS_PER_GROUP: u32 = 4;
const RETAINED_REGIONS: u32 = 1_000;
const RETAINED_PER_REGION: u32 = 1_000;
/// Topics cycled through by a match benchmark (a power of two).
const TOPIC_SET: usize = 4_096;

fn filter(text: &str) -> SubscriptionFilter {
    text.parse().expect("valid filter")
}

fn topic(text: &str) -> TopicName {
    text.parse().expect("valid topic")
}

/// Spreads `n` picks over `0..range` (a multiplicative hash, so lookups are not sequential).
fn spread(n: usize, range: u32) -> u32 {
    ((n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 33) as u32 % range
}

fn add_exact(table: &mut SubscriptionTable) {
    for i in 0..EXACT {
        let text = format!("devices/{i:07}/cmd");
        table.subscribe(
            SubscriberId(u64::from(i)),
            &filter(&text),
            SubscriptionOptions::default(),
            None,
        );
    }
}

/// 100k wildcard filters in four shapes: `site/N/+/temperature`, `site/N/#`, `+/N/status` and
/// `site/+/N`.
fn add_wildcards(table: &mut SubscriptionTable) {
    for i in 0..WILDCARD {
        let n = i / 4;
        let text = match i % 4 {
            0 => format!("site/{n:05}/+/temperature"),
            1 => format!("site/{n:05}/#"),
            2 => format!("+/{n:05}/status"),
            _ => format!("site/+/{n:05}"),
        };
        let id = SubscriptionId::new(1 + i % 8);
        table.subscribe(
            SubscriberId(u64::from(EXACT + i)),
            &filter(&text),
            SubscriptionOptions::default(),
            id,
        );
    }
}

fn exact_topics() -> Vec<TopicName> {
    (0..TOPIC_SET)
        .map(|n| topic(&format!("devices/{:07}/cmd", spread(n, EXACT))))
        .collect()
}

fn wildcard_topics() -> Vec<TopicName> {
    (0..TOPIC_SET)
        .map(|n| {
            topic(&format!(
                "site/{:05}/room/temperature",
                spread(n, WILDCARD / 4)
            ))
        })
        .collect()
}

/// Median-friendly match loop: one topic per iteration, cycling through `topics`.
fn bench_match(c: &mut Criterion, name: &str, table: &mut SubscriptionTable, topics: &[TopicName]) {
    let publisher = Publisher::default();
    let mut out = Matches::new();
    let mut next = 0_usize;
    c.bench_function(name, |b| {
        b.iter(|| {
            let t = &topics[next & (TOPIC_SET - 1)];
            next += 1;
            table.match_topic(t, &publisher, &mut out);
            black_box(out.len())
        });
    });
}

fn match_benches(c: &mut Criterion) {
    let (exact, wild) = (exact_topics(), wildcard_topics());
    let mut wildcard_only = SubscriptionTable::default();
    add_wildcards(&mut wildcard_only);
    bench_match(c, "match/wildcard_100k", &mut wildcard_only, &wild);
    drop(wildcard_only);

    let mut table = SubscriptionTable::default();
    add_exact(&mut table);
    bench_match(c, "match/exact_1m", &mut table, &exact);
    add_wildcards(&mut table);
    bench_match(
        c,
        "match/exact_1m+wildcard_100k/exact_topic",
        &mut table,
        &exact,
    );
    bench_match(
        c,
        "match/exact_1m+wildcard_100k/wildcard_topic",
        &mut table,
        &wild,
    );
    churn_benches(c, &mut table);
}

fn shared_benches(c: &mut Criterion) {
    let options = SubscriptionOptions::default();
    let mut distinct = SubscriptionTable::default();
    let mut same = SubscriptionTable::default();
    for g in 0..GROUPS {
        for m in 0..MEMBERS_PER_GROUP {
            let member = SubscriberId(u64::from(g * MEMBERS_PER_GROUP + m));
            distinct.subscribe(
                member,
                &filter(&format!("$share/g{g}/jobs/{g:04}/+")),
                options,
                None,
            );
            same.subscribe(
                member,
                &filter(&format!("$share/g{g}/jobs/#")),
                options,
                None,
            );
        }
    }
    let topics: Vec<TopicName> = (0..TOPIC_SET)
        .map(|n| topic(&format!("jobs/{:04}/run", spread(n, GROUPS))))
        .collect();
    bench_match(
        c,
        "match/shared_1k_groups/one_group_matches",
        &mut distinct,
        &topics,
    );
    bench_match(
        c,
        "match/shared_1k_groups/all_groups_match",
        &mut same,
        &topics,
    );
}

/// Times `op` over `iters` fresh filters; `setup` and `teardown` run outside the timing.
fn timed_filters(
    iters: u64,
    first: &mut u64,
    mut setup: impl FnMut(&SubscriptionFilter),
    mut op: impl FnMut(&SubscriptionFilter),
    mut teardown: impl FnMut(&SubscriptionFilter),
) -> Duration {
    let filters: Vec<_> = (*first..*first + iters)
        .map(|n| filter(&format!("churn/{n}/x")))
        .collect();
    *first += iters;
    filters.iter().for_each(&mut setup);
    let start = Instant::now();
    filters.iter().for_each(&mut op);
    let elapsed = start.elapsed();
    filters.iter().for_each(&mut teardown);
    elapsed
}

fn churn_benches(c: &mut Criterion, table: &mut SubscriptionTable) {
    let who = SubscriberId(u64::MAX);
    let options = SubscriptionOptions::default();
    let mut group = c.benchmark_group("churn_on_1.1m_table");
    group.throughput(Throughput::Elements(1));
    let mut first = 0_u64;
    let table = std::cell::RefCell::new(table);
    let subscribe = |f: &SubscriptionFilter| {
        table.borrow_mut().subscribe(who, f, options, None);
    };
    let unsubscribe = |f: &SubscriptionFilter| {
        table.borrow_mut().unsubscribe(who, f);
    };
    group.bench_function("subscribe_exact", |b| {
        b.iter_custom(|iters| timed_filters(iters, &mut first, |_| {}, subscribe, unsubscribe));
    });
    group.bench_function("unsubscribe_exact", |b| {
        b.iter_custom(|iters| timed_filters(iters, &mut first, subscribe, unsubscribe, |_| {}));
    });
    group.finish();
}

fn retained_benches(c: &mut Criterion) {
    let mut store = RetainedStore::new();
    for r in 0..RETAINED_REGIONS {
        for d in 0..RETAINED_PER_REGION {
            store.store(
                &topic(&format!("region/{r:03}/devices/{d:04}/state")),
                d,
                64,
            );
        }
    }
    let mut group = c.benchmark_group("retained_1m");
    for text in [
        "region/042/#",
        "region/+/devices/0042/state",
        "region/042/devices/0042/state",
    ] {
        let parsed: TopicFilter = text.parse().expect("valid filter");
        let found = store.matching(&parsed).count() as u64;
        group.throughput(Throughput::Elements(found));
        group.bench_with_input(BenchmarkId::from_parameter(text), &parsed, |b, f| {
            b.iter(|| store.matching(f).map(|(_, v)| u64::from(*v)).sum::<u64>());
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    match_benches(&mut c);
    shared_benches(&mut c);
    retained_benches(&mut c);
    c.final_summary();
}
