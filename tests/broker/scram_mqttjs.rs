//! A third-party MQTT 5 client through the SCRAM AUTH exchange: mqtt.js (npm `mqtt` 5, installed
//! by scripts/test.d/00-tools.sh into `RINGMQ_MQTTJS_DIR`, default
//! `~/.cache/ringmq-test/mqttjs`) running `scram_mqttjs.js`.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::PathBuf;
use std::process::Command;

use crate::harness::TestBroker;
use crate::scram::{add_user, scram_broker};
use crate::scram_client::Hash;

/// Where mqtt.js is installed (its `node_modules`).
fn mqttjs_modules() -> PathBuf {
    let dir = std::env::var_os("RINGMQ_MQTTJS_DIR").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/ringmq-test/mqttjs"),
        PathBuf::from,
    );
    let modules = dir.join("node_modules");
    assert!(
        modules.join("mqtt/package.json").exists(),
        "mqtt.js is not installed in {}: run scripts/test.d/00-tools.sh (ensure_mqtt_js)",
        dir.display()
    );
    modules
}

/// What the mqtt.js script printed for a login as `user`.
fn mqttjs_login(broker: &TestBroker, hash: Hash, user: &str, password: &str) -> String {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/broker/scram_mqttjs.js"
    );
    let output = Command::new("node")
        .arg(script)
        .arg(format!("mqtt://{}", broker.addr()))
        .args([hash.method(), user, password])
        .env("NODE_PATH", mqttjs_modules())
        .output()
        .expect("node runs (install nodejs)");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn mqtt_js_logs_in_with_scram_sha_256_and_512_and_is_refused_a_wrong_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scram");
    add_user(&file, "juliet", "balcony", Hash::Sha256);
    add_user(&file, "juliet", "balcony-512", Hash::Sha512);
    let broker = scram_broker(dir.path(), "", "");
    for (hash, password) in [(Hash::Sha256, "balcony"), (Hash::Sha512, "balcony-512")] {
        let printed = mqttjs_login(&broker, hash, "juliet", password);
        assert_eq!(
            printed, "OK users/juliet/mqttjs hello from mqtt.js",
            "{hash:?}"
        );
    }
    let printed = mqttjs_login(&broker, Hash::Sha256, "juliet", "romeo");
    assert!(printed.starts_with("ERROR 135"), "{printed}");
}
