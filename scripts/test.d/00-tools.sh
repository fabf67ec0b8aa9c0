# Tool installation for a fresh machine; each installer is idempotent.
RINGMQ_TEST_STEPS=(tools fmt clippy unit)

ensure_rust_components() {
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
}

test_tools() {
  ensure_rust_components
  # The broker tests drive mosquitto_pub/mosquitto_sub over TLS (tests/broker/tls.rs).
  ensure_mosquitto_clients
  cargo --version
}
