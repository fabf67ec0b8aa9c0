//! Heap use, counted by an instrumented global allocator: bytes per subscription and per
//! retained topic (printed with `--nocapture`, bounded by regression guards), and no allocation
//! at all in a steady-state match.
//!
//! The figures are requested bytes (what the program asks the allocator for), net of frees;
//! they exclude the allocator's own per-block overhead.

use std::alloc::System;

use router::{
    Matches, Publisher, RetainedStore, SubscriberId, SubscriptionFilter, SubscriptionId,
    SubscriptionOptions, SubscriptionTable, TopicName,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const EXACT: u32 = 1_000_000;
const WILDCARD: u32 = 100_000;
const RETAINED: u32 = 200_000;

fn net_bytes(region: &Region<'_, System>) -> usize {
    let change = region.change();
    change
        .bytes_allocated
        .saturating_sub(change.bytes_deallocated)
}

fn filter(text: &str) -> SubscriptionFilter {
    text.parse().expect("valid")
}

/// The allocator counts every thread, so this binary holds a single test that runs its
/// measurements one after the other: no other test thread can allocate inside a region.
#[test]
fn heap_use() {
    a_warm_match_allocates_nothing();
    bytes_per_subscription_and_per_retained_topic();
}

fn bytes_per_subscription_and_per_retained_topic() {
    let options = SubscriptionOptions::default();

    let region = Region::new(GLOBAL);
    let mut exact = SubscriptionTable::default();
    for i in 0..EXACT {
        let text = format!("devices/{i:07}/cmd");
        exact.subscribe(SubscriberId(u64::from(i)), &filter(&text), options, None);
    }
    let per_exact = net_bytes(&region) as f64 / f64::from(EXACT);

    let region = Region::new(GLOBAL);
    let mut wildcard = SubscriptionTable::default();
    for i in 0..WILDCARD {
        let text = format!("site/{i:06}/+/temperature");
        wildcard.subscribe(
            SubscriberId(u64::from(i)),
            &filter(&text),
            options,
            SubscriptionId::new(1),
        );
    }
    let per_wildcard = net_bytes(&region) as f64 / f64::from(WILDCARD);

    let region = Region::new(GLOBAL);
    let mut retained = RetainedStore::new();
    for i in 0..RETAINED {
        let topic: TopicName = format!("region/{}/devices/{i:06}/state", i % 100)
            .parse()
            .expect("valid");
        retained.store(&topic, i, 0);
    }
    let per_retained = net_bytes(&region) as f64 / f64::from(RETAINED);

    println!("bytes per exact subscription (1M, 'devices/NNNNNNN/cmd'): {per_exact:.1}");
    println!(
        "bytes per wildcard subscription (100k, 'site/NNNNNN/+/temperature'): {per_wildcard:.1}"
    );
    println!(
        "bytes per retained topic (200k, 'region/N/devices/NNNNNN/state', u32 value): {per_retained:.1}"
    );
    assert_eq!(exact.stats().exact_filters, EXACT as usize);
    assert!(
        per_exact <= 200.0,
        "the brief's budget: {per_exact} bytes per exact subscription"
    );
    assert!(per_wildcard <= 320.0, "regression guard: {per_wildcard}");
    // About 95 of these bytes (290 before it) are the ordered index that a retained delivery
    // resumes from (`RetainedStore::next_after`): a B-tree entry per topic, sharing its bytes.
    assert!(per_retained <= 400.0, "regression guard: {per_retained}");
}

fn a_warm_match_allocates_nothing() {
    let mut table = SubscriptionTable::default();
    let options = SubscriptionOptions::default();
    let filters = [
        "a/b/c",
        "a/+/c",
        "a/#",
        "#",
        "+/b/+",
        "$share/g/a/#",
        "$share/h/+/b/c",
    ];
    for subscriber in 0..50 {
        for (n, text) in filters.iter().enumerate() {
            let id = SubscriptionId::new(n as u32 + 1);
            table.subscribe(SubscriberId(subscriber), &filter(text), options, id);
        }
    }
    let topics: Vec<TopicName> = ["a/b/c", "x/b/y", "a", "$SYS/x"]
        .iter()
        .map(|t| t.parse().expect("valid"))
        .collect();
    let publisher = Publisher {
        subscriber: Some(SubscriberId(3)),
        client_id: b"publisher",
    };
    let mut out = Matches::new();
    // Warm up with exactly the calls measured below, so every reused buffer has grown.
    for round in 0..topics.len() * 4 {
        let topic = &topics[round % topics.len()];
        table.match_topic(topic, &publisher, &mut out);
        table.match_topic_filtered(topic, &publisher, |s| s.0 % 3 != 0, &mut out);
    }
    let region = Region::new(GLOBAL);
    let mut delivered = 0;
    for round in 0..1_000 {
        let topic = &topics[round % topics.len()];
        table.match_topic_filtered(topic, &publisher, |s| s.0 % 3 != 0, &mut out);
        delivered += out.len();
    }
    let change = region.change();
    assert!(delivered > 10_000, "the matches did real work: {delivered}");
    assert_eq!(
        (change.allocations, change.reallocations),
        (0, 0),
        "steady-state matches allocate nothing"
    );
}
