//! Validation of `[log]`: defaults, the format and rate read, errors that name the key.

use crate::config::{default_raw, parse_raw};
use crate::settings::LogFormat;

fn validate(text: &str) -> Result<crate::config::Config, String> {
    let mut raw = default_raw().map_err(|e| e.to_string())?;
    raw.overlay(parse_raw("t", text).map_err(|e| e.to_string())?);
    raw.validate().map_err(|e| e.to_string())
}

#[test]
fn defaults_are_text_and_a_hundred_lines_a_second() {
    let config = validate("").unwrap();
    assert_eq!(config.log.format, LogFormat::Text);
    assert_eq!(config.log.max_lifecycle_per_sec, 100);
}

#[test]
fn json_and_a_rate_are_read() {
    let config = validate("[log]\nformat = \"json\"\nmax_lifecycle_per_sec = 0\n").unwrap();
    assert_eq!(config.log.format, LogFormat::Json);
    assert_eq!(config.log.max_lifecycle_per_sec, 0);
}

#[test]
fn errors_name_the_key() {
    let error = validate("[log]\nformat = \"xml\"\n").unwrap_err();
    assert!(error.contains("log.format"), "{error}");
    let error = validate("[log]\nmax_lifecycle_per_sec = 2000000\n").unwrap_err();
    assert!(error.contains("log.max_lifecycle_per_sec"), "{error}");
}
