//! `[delayed]`: its defaults and its bounds.

use crate::config::{ConfigError, default_raw, parse_raw};

fn validated(text: &str) -> Result<crate::config::Config, ConfigError> {
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("t", text).unwrap());
    raw.validate()
}

#[test]
fn delayed_publish_is_off_by_default_and_bounded() {
    let delayed = validated("").unwrap().core.delayed;
    assert!(!delayed.enabled);
    assert_eq!(delayed.max_messages, 10_000);
    assert_eq!(delayed.max_delay_seconds, 4_294_967);
    let on = validated("[delayed]\nenabled = true\nmax_messages = 5\n").unwrap();
    assert!(on.core.delayed.enabled);
    assert_eq!(on.core.delayed.max_messages, 5);
}

#[test]
fn a_delay_ceiling_over_emqx_maximum_is_refused() {
    let error = validated("[delayed]\nmax_delay_seconds = 4294968\n").unwrap_err();
    assert!(
        error.to_string().contains("delayed.max_delay_seconds"),
        "{error}"
    );
    assert!(validated("[delayed]\nmax_messages = 0\n").is_err());
}
