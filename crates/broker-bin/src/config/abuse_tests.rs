//! Validation of the publish rates and `[overload]`: defaults, values read, errors naming the key.

use crate::config::{default_raw, parse_raw};

fn validate(text: &str) -> Result<crate::config::Config, String> {
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("t", text).map_err(|e| e.to_string())?);
    raw.validate().map_err(|e| e.to_string())
}

#[test]
fn defaults_limit_nothing() {
    let config = validate("").unwrap();
    assert!(!config.publish_rates.any());
    assert!(!config.overload.enabled());
}

#[test]
fn rates_and_thresholds_are_read() {
    let config = validate(
        "[limits]\nmax_publish_rate = 5\nmax_publish_bytes_rate = 1000\n\
         [overload]\nmemory_high_bytes = 1000\n",
    )
    .unwrap();
    assert_eq!(
        (config.publish_rates.messages, config.publish_rates.bytes),
        (5, 1000)
    );
    assert_eq!(
        (config.overload.memory_high, config.overload.memory_low),
        (1000, 900),
        "low defaults to 90% of high"
    );
    let config = validate("[overload]\nmemory_high_bytes = 1000\nmemory_low_bytes = 10\n");
    assert_eq!(config.unwrap().overload.memory_low, 10);
}

#[test]
fn errors_name_the_key() {
    let error = validate("[overload]\nmemory_high_bytes = 100\nmemory_low_bytes = 100\n");
    assert!(error.unwrap_err().contains("overload.memory_low_bytes"));
    let error = validate("[limits]\nmax_publish_rate = 1000000000\n");
    assert!(error.unwrap_err().contains("limits.max_publish_rate"));
    let error = validate("[limits]\nmax_publish_bytes_rate = -1\n");
    assert!(error.unwrap_err().contains("max_publish_bytes_rate"));
    let error = validate("[overload]\nmemory_hihg_bytes = 1\n");
    assert!(error.unwrap_err().contains("memory_hihg_bytes"));
}
