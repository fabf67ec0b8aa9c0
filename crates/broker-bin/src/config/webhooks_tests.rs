//! `[[webhooks]]` read with its defaults, and its bad keys named.

use crate::config::{default_raw, parse_raw};

fn validated(text: &str) -> Result<crate::config::Config, String> {
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("t", text).map_err(|e| e.to_string())?);
    raw.validate().map_err(|e| e.to_string())
}

#[test]
fn a_webhook_is_read_with_its_defaults() {
    let config = validated(
        "[[webhooks]]\nurl = \"http://127.0.0.1:9/h\"\nevents = [\"client.connected\", \"message.published\"]\ntopics = [\"a/#\"]\n",
    )
    .unwrap();
    let hook = &config.webhooks[0];
    assert_eq!(hook.events.len(), 2);
    assert_eq!(hook.topics, ["a/#"]);
    assert_eq!(
        (hook.batch_max, hook.queue_capacity, hook.max_attempts),
        (100, 10_000, 5)
    );
}

#[test]
fn bad_webhook_keys_are_named() {
    let error = validated("[[webhooks]]\nevents = [\"client.connected\"]\n").unwrap_err();
    assert!(error.contains("webhooks.url"), "{error}");
    let error =
        validated("[[webhooks]]\nurl = \"http://x/\"\nevents = [\"client.joined\"]\n").unwrap_err();
    assert!(
        error.contains("webhooks.events") && error.contains("client.connected"),
        "{error}"
    );
    let error = validated(
        "[[webhooks]]\nurl = \"http://x/\"\nevents = [\"client.connected\"]\nbatch_max = 0\n",
    )
    .unwrap_err();
    assert!(error.contains("webhooks.batch_max"), "{error}");
    let error =
        validated("[[webhooks]]\nurl = \"http://x/\"\nevents = []\nretries = 3\n").unwrap_err();
    assert!(error.contains("retries"), "{error}");
}
