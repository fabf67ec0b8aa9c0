use std::time::Duration;

use super::*;
use crate::scrape::Scrape;

#[test]
fn families_have_help_and_type_and_escaped_labels() {
    let mut doc = Exposition::default();
    doc.single("ringmq_up", Kind::Gauge, "Whether it runs.\nReally.", 1);
    doc.family("ringmq_things_total", Kind::Counter, "Things.");
    doc.sample("ringmq_things_total", &[("kind", "a\"b\\c\nd")], 3);
    let text = doc.finish();
    assert!(text.contains("# HELP ringmq_up Whether it runs.\\nReally.\n"));
    assert!(text.contains("# TYPE ringmq_things_total counter\n"));
    assert!(text.contains("ringmq_things_total{kind=\"a\\\"b\\\\c\\nd\"} 3\n"));
    let scrape = Scrape::parse(&text).expect("valid");
    assert_eq!(
        scrape.value("ringmq_things_total", &[("kind", "a\"b\\c\nd")]),
        Some(3.0)
    );
}

#[test]
fn histograms_are_cumulative_and_end_at_inf_equal_to_count() {
    // Observations of 0, 3 ms and 5 s.
    let bounds = [
        Duration::from_micros(50),
        Duration::from_millis(5),
        Duration::from_secs(1),
    ];
    let buckets = Buckets {
        bounds: &bounds,
        counts: &[1, 1, 0, 1],
        sum: Duration::from_millis(5_003),
    };
    let mut doc = Exposition::default();
    doc.family("ringmq_latency_seconds", Kind::Histogram, "Latency.");
    doc.histogram("ringmq_latency_seconds", &[("shard", "0")], buckets);
    let text = doc.finish();
    let scrape = Scrape::parse(&text).expect("valid");
    let bucket = |le: &str| {
        scrape
            .value(
                "ringmq_latency_seconds_bucket",
                &[("shard", "0"), ("le", le)],
            )
            .expect("bucket present")
    };
    assert_eq!(bucket("0.00005"), 1.0);
    assert_eq!(bucket("0.005"), 2.0);
    assert_eq!(bucket("1"), 2.0);
    assert_eq!(bucket("+Inf"), 3.0);
    let count = scrape.value("ringmq_latency_seconds_count", &[("shard", "0")]);
    assert_eq!(count, Some(3.0));
    let sum = scrape.value("ringmq_latency_seconds_sum", &[("shard", "0")]);
    assert_eq!(sum, Some(5.003));
}

#[test]
fn the_checker_refuses_what_prometheus_would() {
    for bad in [
        "ringmq_x 1\n",
        "# HELP ringmq_x x\nringmq_x 1\n",
        "# HELP ringmq_x x\n# TYPE ringmq_x counter\nringmq_x 1\n",
        "# HELP a x\n# TYPE a gauge\n# HELP b x\n# TYPE b gauge\na 1\n",
        "# HELP a x\n# TYPE a gauge\na{l=\"1} 1\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n",
        "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0\nh_count 3\n",
    ] {
        assert!(Scrape::parse(bad).is_err(), "accepted: {bad}");
    }
}
