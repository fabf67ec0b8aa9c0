//! Validation of `[slow_subscribers]`: defaults and bounds.
use crate::config::{default_raw, parse_raw};

fn load(text: &str) -> Result<crate::config::Config, crate::config::ConfigError> {
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("test", text).unwrap());
    raw.validate()
}

#[test]
fn defaults_and_bounds() {
    let slow = load("").unwrap().core.slow_subscribers;
    assert_eq!(slow.threshold, std::time::Duration::from_millis(500));
    assert_eq!((slow.top, slow.expire.as_secs()), (10, 300));
    let error = load("[slow_subscribers]\nthreshold_ms = 0\n").unwrap_err();
    assert!(
        error.to_string().contains("slow_subscribers.threshold_ms"),
        "{error}"
    );
    assert_eq!(
        load("[slow_subscribers]\ntop = 0\n")
            .unwrap()
            .core
            .slow_subscribers
            .top,
        0
    );
}
